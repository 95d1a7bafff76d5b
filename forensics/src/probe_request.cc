#include "hangwatch/forensics/probe_request.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::forensics {

nlohmann::json ProbeRequest::toJson() const {
  nlohmann::json comms_json = nlohmann::json::array();
  for (const ProbeComm& c : comms)
    comms_json.push_back({{"address", c.address}, {"nccl_id", c.nccl_id}, {"hash", c.hash}, {"rank", c.rank}});
  return {{"backend", backend}, {"debugger", debugger}, {"comms", std::move(comms_json)}, {"comm_table", comm_table}};
}

ProbeRequest makeProbeRequest(const std::string& backend, bool cuda_gdb, const std::string& snapshot_path, pid_t pid) {
  ProbeRequest r;
  r.backend = backend;
  r.debugger = cuda_gdb ? "cuda-gdb" : "gdb";
  if (backend != "cuda") return r;  // the sim reader finds its communicators from the wait frames
  std::ifstream in(snapshot_path);
  if (!in) {
    r.comm_table = snapshot_path + ": not there (the watchdog did not write it, or the collector ran by hand)";
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  Expected<WatchdogSnapshot> snap = j.is_discarded() ? Expected<WatchdogSnapshot>(Error{"not JSON"})
                                                     : watchdogSnapshotFromJson(j);
  if (!snap) {
    r.comm_table = snapshot_path + ": unreadable: " + snap.error();
    return r;
  }
  if (snap->identity.pid != 0 && snap->identity.pid != pid) {
    r.comm_table =
        fmt::format("{}: of pid {}, not {} (an earlier run's): not used", snapshot_path, snap->identity.pid, pid);
    return r;
  }
  size_t skipped = 0, beyond = 0;
  for (const SnapshotComm& c : snap->comms) {
    // A destroyed or aborted communicator's memory is freed: its address means nothing any more.
    if (c.address.empty() || c.state == "destroyed" || c.state == "aborted") {
      ++skipped;
      continue;
    }
    if (r.comms.size() == kMaxProbeComms) {
      ++beyond;
      continue;
    }
    r.comms.push_back({c.address, c.nccl_id, c.hash, c.rank});
  }
  r.comm_table = fmt::format("{}: {} communicator(s)", snapshot_path, r.comms.size());
  if (skipped) r.comm_table += fmt::format(", {} destroyed, aborted or without an address left out", skipped);
  if (beyond) r.comm_table += fmt::format(", {} beyond the first {} left out", beyond, kMaxProbeComms);
  return r;
}

}  // namespace hangwatch::forensics
