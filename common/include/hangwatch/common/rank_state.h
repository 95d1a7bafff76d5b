#pragma once
// ranks/rNNNNN.state.json (DESIGN.md §4): whether a rank's dumps are still being
// collected or done, rewritten atomically at each change. `abort` mode waits for every
// rank's "done" before exiting, and `forensics report` tells "still collecting" from
// "missing" with it.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

enum class DumpPhase { kCollecting, kDone };

const char* dumpPhaseName(DumpPhase p);

struct RankState {
  int schema_version = 1;
  int rank = -1;
  DumpPhase phase = DumpPhase::kCollecting;
  int64_t pid = 0;              // the rank's process
  std::string host;
  std::optional<int> device;    // its CUDA device, when known
  double time_unix_s = 0;       // when this state was written
  // Readers stop waiting for a collecting rank after this wall-clock time: by then its
  // collector has given up (its own hard bounds), or was killed.
  double deadline_unix_s = 0;
  int64_t collector_pid = 0;    // 0: no collector running (yet)
  std::string snapshot;         // "written", "failed: ..."
  std::string forensics;        // "pending", "written", "degraded", "failed: ...", "off", "not started: ..."
  std::string note;             // why it ended the way it did, e.g. "target exited during the debugger phase"
  // Written by another rank of the node, which found this rank's process ended (killed, crashed,
  // or exited; `note` says which) when it dumped: that rank's number.
  std::optional<int> exited_seen_by;
  // With exited_seen_by: the process marked itself, before it ended, as ending on a SIGTERM it
  // passed on with no GPU communication pending (the launcher ending the job): no cause of a hang.
  bool exited_on_term = false;
  // Written by another rank of the node, which found this rank's process alive but stopped
  // (SIGSTOP or a job-control stop: frozen, it answers nothing): that rank's number.
  std::optional<int> stopped_seen_by;

  bool done() const { return phase == DumpPhase::kDone; }
  // Done, or collecting past its deadline: nobody should wait for it any longer.
  bool settled(double now_unix_s) const { return done() || (deadline_unix_s > 0 && now_unix_s > deadline_unix_s); }
};

nlohmann::json toJson(const RankState& s);
// Tolerant reader: missing fields keep their defaults; a wrong type or an unknown phase is an error.
Expected<RankState> rankStateFromJson(const nlohmann::json& j);
Expected<RankState> rankStateFromText(const std::string& text);
// Reads the file; an error when it is missing, partial or unreadable.
Expected<RankState> readRankState(const std::string& path);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct EnumNames<DumpPhase> {
  static constexpr std::pair<DumpPhase, std::string_view> names[] = {{DumpPhase::kCollecting, "collecting"},
                                                                     {DumpPhase::kDone, "done"}};
};

template <>
struct Schema<RankState> {
  static constexpr const char* what = "rank state";
  static constexpr auto fields = std::tuple{
      field("schema_version", &RankState::schema_version, "schema_version"),
      field("rank", &RankState::rank, "rank"),
      field("state", &RankState::phase, "state"),
      field("pid", &RankState::pid, "pid"),
      field("host", &RankState::host, "host"),
      field("device", &RankState::device, "device"),
      field("time_unix_s", &RankState::time_unix_s, "time_unix_s"),
      field("deadline_unix_s", &RankState::deadline_unix_s, "deadline_unix_s"),
      field("collector_pid", &RankState::collector_pid, "collector_pid"),
      field("snapshot", &RankState::snapshot, "snapshot"),
      field("forensics", &RankState::forensics, "forensics"),
      field("note", &RankState::note, "note"),
      field("exited_seen_by", &RankState::exited_seen_by, "exited_seen_by"),
      field("exited_on_term", &RankState::exited_on_term, "exited_on_term"),
      field("stopped_seen_by", &RankState::stopped_seen_by, "stopped_seen_by"),
  };
};

}  // namespace hangwatch::schema
