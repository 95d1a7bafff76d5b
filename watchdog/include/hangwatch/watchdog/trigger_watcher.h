#pragma once
// TRIGGER.json (DESIGN.md §4): the first detector creates it with O_EXCL semantics and says
// so in TRIGGER.beacon; every rank learns of it from its node's shared board, which one rank
// of the node refreshes from the beacon once per check interval (trigger_beacon.h explains
// why a beacon and not a stat()). Shared storage thus sees a fixed number of look-ups per
// node and second, whatever the number of ranks on the node.
#include <cstdint>
#include <optional>
#include <string>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/trigger_record.h"
#include "hangwatch/watchdog/node_share.h"
#include "hangwatch/common/trigger_beacon.h"

namespace hangwatch::watchdog {

class TriggerWatcher {
 public:
  // Once the job triggered, the beacon is re-read this often (per node) to learn that every
  // rank's dumps are done.
  static constexpr int64_t kCompletionCheckNs = 1'000'000'000;
  // Every this many trigger look-ups, TRIGGER.json is also stat()ed.
  static constexpr int kStatEvery = 8;

  // `node` is the board this node's ranks share (not owned); nullptr: one of our own. A
  // TRIGGER.json written before `not_before_unix_s` (this process's start) is an earlier
  // launch's and never triggers this one (0: any counts).
  TriggerWatcher(std::string job_dir, int64_t check_interval_ns, NodeShare* node = nullptr,
                 double not_before_unix_s = 0);

  // True once the job triggered: the node's board says so, or this rank's turn to look at
  // shared storage came (claimLookup) and the look found the trigger (lookUp).
  bool triggered(int64_t now_ns) { return node_->triggered() || (claimLookup(now_ns) && lookUp()); }
  // Whether this rank is the node's one to look at shared storage now (claims the turn; no I/O).
  bool claimLookup(int64_t now_ns);
  // The look itself (file I/O: the watchdog runs it where a stalled folder cannot hold the poller).
  bool lookUp();
  // True when this call created TRIGGER.json, false when another detector had already won.
  Expected<bool> fire(const TriggerRecord& record);
  // After the trigger: true once the beacon (or this node's board) says every rank's dumps are done.
  bool jobComplete(int64_t now_ns);
  // The latest early warning announced (0: none), as of this node's last look at the beacon.
  int suspectedEpisode() const { return node_->suspectedEpisode(); }
  // Creates the early warning's record (SUSPECT.json, or SUSPECT.<episode>.json) unless another
  // rank did, and announces it in the beacon. True when this call created it.
  Expected<bool> fireSuspect(const TriggerRecord& record, int episode);
  // Says in the beacon and on this node's board that every rank's dumps are done.
  Expected<bool> announceComplete(int ranks_done, int ranks_given_up, double now_unix_s);
  // The record in place (tolerant: nullopt when missing or unreadable).
  std::optional<TriggerRecord> read() const;
  const std::string& path() const { return path_; }
  NodeShare& node() { return *node_; }

 private:
  // Reads the beacon; learns first which of its bytes predate this run (stale lines).
  std::optional<BeaconState> lookAtBeacon();
  // False for a TRIGGER.json older than this process: it stays ignored from then on.
  bool triggerIsThisLaunchs();

  std::string path_;
  std::string job_dir_;
  int64_t interval_ns_;
  std::unique_ptr<NodeShare> own_node_;
  NodeShare* node_;
  TriggerBeacon beacon_;
  int trigger_lookups_ = 0;
  bool beacon_failed_ = false;
  double not_before_unix_s_ = 0;
  bool earlier_trigger_ = false;
};

}  // namespace hangwatch::watchdog
