#pragma once
// The watchdog's environment (DESIGN.md §4, contract) plus its own tuning knobs.
#include <cstdint>
#include <string>

#include "hangwatch/common/rank_identity.h"

namespace hangwatch::watchdog {

enum class OnHang { kWait, kAbort };

struct WatchdogConfig {
  bool disabled = false;          // HANGWATCH_DISABLE=1: pure pass-through
  double timeout_s = 300;         // HANGWATCH_TIMEOUT
  double warn_after_s = 15;       // HANGWATCH_WARN_AFTER: early warning after this long without progress, 0 = off
  OnHang on_hang = OnHang::kWait; // HANGWATCH_ON_HANG
  bool collect = true;            // HANGWATCH_COLLECT
  bool node_summary = true;       // HANGWATCH_NODE_SUMMARY=0: the node's last collector merges nothing
  // HANGWATCH_ASK_RAS=0: nobody asks NCCL's RAS after a hang (the collector's --no-ras; with
  // HANGWATCH_COLLECT=0, no `forensics ras` from the node's lowest rank either).
  bool ask_ras = true;
  double metrics_interval_s = 10; // HANGWATCH_METRICS_INTERVAL
  std::string job_dir;            // $HANGWATCH_DUMP_DIR/<job-id>
  std::string forensics_binary;   // HANGWATCH_FORENSICS, empty: find it
  std::string debugger;           // HANGWATCH_DEBUGGER, passed on to the collector's environment
  uint32_t kernel_sample = 64;    // HANGWATCH_KERNEL_SAMPLE: time 1 in N generic kernels, 0 = none
  double collect_wait_s = 120;    // HANGWATCH_COLLECT_WAIT: bound on waiting for the collector
  // HANGWATCH_ABORT_GRACE: in abort mode, the longest a rank waits, from when it began
  // dumping, for every rank's dumps to be done before it exits. As long as a rank waits for
  // its own collector, so a slow collection elsewhere is never cut shorter than one's own.
  double abort_grace_s = 120;
  std::string prometheus_dir;     // HANGWATCH_PROMETHEUS_DIR: node_exporter textfile directory, empty: none
  // HANGWATCH_FALLBACK_DIR: node-local root the dumps go to when the dump folder fails or
  // stalls (dump_storage.h); the job's files go to <root>/<job-id>/.
  std::string fallback_root;
  // HANGWATCH_STORAGE_DEADLINE: the longest one operation on the dump folder may take before
  // the folder is taken for stalled and given up.
  double storage_deadline_s = 10;
  // HANGWATCH_IO_HELPER=0: the storage thread does the dump folder's file operations itself
  // instead of through its helper process (io_helper.h).
  bool io_helper = true;

  int64_t timeoutNs() const { return static_cast<int64_t>(timeout_s * 1e9); }
  int64_t warnAfterNs() const { return static_cast<int64_t>(warn_after_s * 1e9); }
  // The job's folder under fallback_root.
  std::string fallbackJobDir() const;
};

// Malformed values keep the default; `warnings` says which (the caller logs them).
WatchdogConfig watchdogConfigFromEnv(const EnvLookup& env, std::string* warnings);

}  // namespace hangwatch::watchdog
