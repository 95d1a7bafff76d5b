#include "hangwatch/watchdog/trigger_watcher.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/watchdog/watchdog_log.h"

namespace hangwatch::watchdog {

TriggerWatcher::TriggerWatcher(std::string job_dir, int64_t check_interval_ns, NodeShare* node,
                               double not_before_unix_s)
    : path_(triggerPath(job_dir)),
      job_dir_(job_dir),
      interval_ns_(check_interval_ns),
      own_node_(node ? nullptr : NodeShare::unshared()),
      node_(node ? node : own_node_.get()),
      beacon_(std::move(job_dir)),
      not_before_unix_s_(not_before_unix_s) {}

std::optional<BeaconState> TriggerWatcher::lookAtBeacon() {
  int64_t base = node_->beaconBase();
  node_->countLookup();
  Expected<BeaconState> state = beacon_.read(base < 0 ? 0 : base);
  if (!state) {
    if (!beacon_failed_)
      WatchdogLog::instance().failureOnce("beacon-read", "cannot read the trigger beacon, falling back to stat() of " +
                                                             path_ + ": " + state.error());
    beacon_failed_ = true;
    return std::nullopt;
  }
  beacon_failed_ = false;
  // Early warnings ride on the same read: no look-up of their own.
  if (state->suspected_episode > 0) node_->noteSuspected(state->suspected_episode);
  if (base < 0) {
    // A beacon that says "triggered" while TRIGGER.json is gone is left from an earlier run
    // of this job directory (someone removed the trigger to re-arm it): its lines do not count.
    bool stale = false;
    if (state->triggered) {
      node_->countLookup();
      stale = !beacon_.triggerFileExists();
    }
    // Lines after the base are looked at from the next turn on.
    if (node_->setBeaconBase(stale ? state->size : 0) > 0) return BeaconState{.size = state->size};
  }
  return *state;
}

bool TriggerWatcher::claimLookup(int64_t now_ns) {
  return node_->claim(NodeShare::Lookup::kTrigger, now_ns, interval_ns_);
}

bool TriggerWatcher::lookUp() {
  std::optional<BeaconState> state = lookAtBeacon();
  bool seen = state && state->triggered;
  if (!seen && (!state || ++trigger_lookups_ % kStatEvery == 0)) {
    node_->countLookup();
    seen = beacon_.triggerFileExists();
  }
  if (seen && !triggerIsThisLaunchs()) seen = false;
  if (seen) node_->markTriggered();
  return seen;
}

bool TriggerWatcher::triggerIsThisLaunchs() {
  if (earlier_trigger_) return false;
  if (not_before_unix_s_ <= 0) return true;
  node_->countLookup();
  std::optional<TriggerRecord> t = read();
  if (!t || t->time_unix_s <= 0 || t->time_unix_s >= not_before_unix_s_) return true;
  earlier_trigger_ = true;
  WatchdogLog::instance().failureOnce(
      "earlier-trigger", fmt::format("ignoring {}: written {:.0f} s before this process started, by an earlier launch",
                                     path_, not_before_unix_s_ - t->time_unix_s));
  return false;
}

Expected<bool> TriggerWatcher::fire(const TriggerRecord& record) {
  auto created = createFileExclusively(path_, toJson(record).dump(2) + "\n");
  if (!created.ok()) return created;
  node_->markTriggered();
  if (*created) {
    auto said = beacon_.append(beaconTriggerLine(record.rank.value_or(-1), record.host, record.pid, record.time_unix_s));
    if (!said)
      WatchdogLog::instance().failureOnce("beacon-write", "TRIGGER.json written but not the beacon: " + said.error());
  }
  return created;
}

bool TriggerWatcher::jobComplete(int64_t now_ns) {
  if (node_->complete()) return true;
  if (!node_->claim(NodeShare::Lookup::kCompletion, now_ns, kCompletionCheckNs)) return false;
  std::optional<BeaconState> state = lookAtBeacon();
  if (state && state->complete) node_->markComplete();
  return node_->complete();
}

Expected<bool> TriggerWatcher::fireSuspect(const TriggerRecord& record, int episode) {
  auto created = createFileExclusively(suspectPath(job_dir_, episode), toJson(record).dump(2) + "\n");
  if (!created.ok()) return created;
  node_->noteSuspected(episode);
  if (*created) {
    auto said = beacon_.append(
        beaconSuspectLine(episode, record.rank.value_or(-1), record.host, record.pid, record.time_unix_s));
    if (!said)
      WatchdogLog::instance().failureOnce("beacon-suspect", "SUSPECT.json written but not the beacon: " + said.error());
  }
  return created;
}

Expected<bool> TriggerWatcher::announceComplete(int ranks_done, int ranks_given_up, double now_unix_s) {
  node_->markComplete();
  return beacon_.append(beaconCompleteLine(ranks_done, ranks_given_up, now_unix_s));
}

std::optional<TriggerRecord> TriggerWatcher::read() const {
  Expected<TriggerRecord> t = readTriggerFile(path_);
  if (!t) return std::nullopt;
  return std::move(*t);
}

}  // namespace hangwatch::watchdog
