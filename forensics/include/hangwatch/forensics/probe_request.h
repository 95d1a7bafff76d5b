#pragma once
// What the collector tells the debugger script (gdb-scripts/collector_probe.py) in
// $HANGWATCH_PROBE: the backend it chose from the process, the debugger it started, and on
// the cuda backend the communicators of the rank's watchdog comm table. NCCL's proxy
// threads hold no `comm` variable, so the table's ncclComm_t addresses are how the script
// finds communicators in a live process; its frame search is only the fallback.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hangwatch::forensics {

struct ProbeComm {
  std::string address;  // the ncclComm_t, "0x..."
  std::string nccl_id;  // NCCL's commHash, hex; empty when the watchdog could not tie it
  std::string hash;     // the watchdog's hash of the communicator
  int rank = -1;
};

struct ProbeRequest {
  std::string backend;   // "sim" or "cuda"
  std::string debugger;  // "cuda-gdb" or "gdb"
  std::vector<ProbeComm> comms;
  std::string comm_table;  // where the comms came from, or why there are none

  nlohmann::json toJson() const;
};

inline constexpr const char* kProbeEnv = "HANGWATCH_PROBE";
// At most this many communicators go into the environment (one string of at most 128 KiB).
inline constexpr size_t kMaxProbeComms = 512;

// The live communicators with an address in the watchdog snapshot at `snapshot_path`, if
// that snapshot is of process `pid`; otherwise none, and comm_table says why.
ProbeRequest makeProbeRequest(const std::string& backend, bool cuda_gdb, const std::string& snapshot_path, pid_t pid);

}  // namespace hangwatch::forensics
