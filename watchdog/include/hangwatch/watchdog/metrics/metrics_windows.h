#pragma once
// Rolling metrics windows (DESIGN.md §4: metrics/rNNNNN.jsonl). The poller hands over
// every completed op and host synchronization; every `interval_s` one aggregated JSON
// line is appended. Memory is bounded whatever the job length: per-key fixed
// histograms, a cap on distinct keys, on streams and on sync call names, and a bounded
// open-interval list for busy time.
//
// Threading: not thread-safe by design. Every call comes from the watchdog's single
// poller thread; nothing here runs on the training job's launch path.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "hangwatch/watchdog/metrics/busy_timeline.h"
#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/watchdog/metrics/link_meter.h"
#include "hangwatch/watchdog/metrics/metrics_file_writer.h"
#include "hangwatch/watchdog/metrics/op_key_table.h"
#include "hangwatch/watchdog/metrics/op_record.h"
#include "hangwatch/watchdog/metrics/prometheus_textfile.h"
#include "hangwatch/watchdog/metrics/step_tracker.h"
#include "hangwatch/watchdog/metrics/timeline_ring.h"

namespace hangwatch::watchdog {

struct MetricsConfig {
  int rank = 0;
  std::string path;            // metricsPath(job_dir, rank): metrics/rNNNNN.jsonl
  double interval_s = 10;      // HANGWATCH_METRICS_INTERVAL
  std::string host;
  int64_t pid = 0;             // 0: getpid()
  int device = -1;             // CUDA device, -1 until known (setDevice)
  int64_t start_ns = 0;        // CLOCK_MONOTONIC start of the first window; 0: now
  size_t max_keys = 64;        // distinct op keys per window before "other"
  // timeline/rNNNNN.json, rewritten at every flush from a ring of the last ops; "" = none.
  std::string timeline_path;
  size_t timeline_ops = 4096;
  size_t timeline_syncs = 1024;
  // Network transfers per connection (NCCL's profiler plugin), drained into each window; may be null.
  LinkMeter* links = nullptr;
  // node_exporter textfile rewritten at every flush (PrometheusTextfile::pathFor); "" = none.
  std::string prometheus_path;
  std::string attempt;  // this launch's name (attempt.h), a label of every Prometheus series
  // Called once when writing fails (then metrics stop); default: a line on stderr.
  std::function<void(const std::string&)> log_failure;
  // Where the window lines and the timeline go instead of being written here, on this thread:
  // the watchdog queues them for its storage thread (dump_storage.h), which never makes the
  // poller wait on the dump folder. Unset: written here.
  std::function<void(const std::string& path, std::string line)> append_line;
  std::function<void(const std::string& path, std::string contents)> replace_file;
};

class MetricsWindows {
 public:
  explicit MetricsWindows(MetricsConfig config);

  void record(const CompletedOp& op);
  void recordHostSync(const HostSync& sync);
  // An explicit step end (CLOCK_MONOTONIC ns); once used, steps are no longer inferred.
  void recordStepEnd(int64_t end_ns);
  // Ops the poller lost before they reached here (a full queue, an event error).
  void noteDropped(uint64_t n) { dropped_ += n; }
  // The CUDA device, once the watchdog learns it: in every window and timeline from the next flush.
  void setDevice(int device) { config_.device = device; }

  // Writes the window if `interval_s` has elapsed since it started.
  void maybeFlush(int64_t now_ns);
  // Writes the window now (the last one, or at a hang) and starts the next.
  void flush(int64_t now_ns);
  // The hang trigger fired: the Prometheus textfile says so from the next flush on.
  void markHang() { prometheus_.markHang(); }
  // The early warning: suspected until this rank's GPU work moved again. Rewrites the
  // Prometheus textfile at once, so an alert does not wait for the next window.
  void markSuspected(bool suspected) { prometheus_.markSuspected(suspected, last_); }
  // The dump folder was given up for `fallback_dir`: the Prometheus textfile says so at once.
  void markDumpFallback(const std::string& fallback_dir) { prometheus_.markDumpFallback(fallback_dir, last_); }

  // The window the last flush wrote (or tried to write).
  const MetricsWindow& lastWindow() const { return last_; }
  bool writeFailed() const { return writer_.failed(); }

 private:
  struct SyncAggregate {
    uint64_t count = 0;
    int64_t total_ns = 0;
  };
  struct StreamAggregate {
    int64_t last_end_ns = 0;
    int64_t busy_ns = 0;
  };

  MetricsWindow build(int64_t now_ns, const BusyTimeline::WindowTotals& totals) const;
  void writeTimeline(int64_t now_ns);
  void resetWindow(int64_t start_ns);
  void addStreamBusy(const CompletedOp& op);

  MetricsConfig config_;
  int64_t interval_ns_;
  MetricsFileWriter writer_;
  int64_t window_start_ns_;
  OpKeyTable keys_;
  BusyTimeline timeline_;
  StepTracker steps_;
  LogHistogram issue_latency_[kOpClassCount];  // by OpClass
  std::map<uint64_t, StreamAggregate> streams_;
  std::map<std::string, SyncAggregate, std::less<>> syncs_;
  uint64_t dropped_ = 0;
  MetricsWindow last_;
  TimelineRing ring_;
  bool timeline_failed_ = false;
  PrometheusTextfile prometheus_;
};

}  // namespace hangwatch::watchdog
