#pragma once
// What a rank does after its snapshot is written, on a dedicated thread so that neither the
// poller nor the training threads wait for it: run the collector (bounded; with the collector
// off, the node's lowest rank asks NCCL's RAS instead), mark this rank's dumps done
// (ranks/rNNNNN.state.json), then apply HANGWATCH_ON_HANG. In abort mode the rank
// exits only once every rank of the job is done or HANGWATCH_ABORT_GRACE has passed, so the
// launcher's kill-on-exit does not cut other ranks' collections short.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/watchdog/collector_launcher.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/watchdog/watchdog_config.h"

namespace hangwatch::watchdog {

struct HangResponse {
  bool collect = false;
  CollectorRequest collector;
  // With the collector off: `forensics ras` for this node, before the rank is marked done.
  std::optional<RasRequest> ras;
  OnHang on_hang = OnHang::kWait;
  // This rank's state as written when dumping began; the responder writes it "done".
  RankState state;
  std::string state_path;  // empty: no state file (no rank known)
  double abort_grace_s = 120;
  std::chrono::steady_clock::time_point dump_started = std::chrono::steady_clock::now();
  // Abort mode: true once every rank of the job is done (polled).
  std::function<bool()> job_complete;
  // Called once this rank's own dumps are done (or given up on), whatever HANGWATCH_ON_HANG.
  std::function<void()> on_done;
  // The framework declared the hang and is ending the job itself (declared_hang.h): no abort
  // of hangwatch's own, its exit status stays the framework's.
  bool declared = false;
  // Writes a file of the dump folder, bounded in time (DumpStorage::write); unset: here.
  std::function<Expected<Written>(const std::string& path, std::string contents)> write_file;
};

// Where one rank's dump goes (job_layout): named by rank, or by pid while no rank is known.
struct DumpPaths {
  std::string job_dir;  // this launch's folder (attempt.h), where the collector writes too
  std::string snapshot;
  std::string state;  // empty without a rank: nobody waits for a rank it cannot name
  std::string collect_log;
};

DumpPaths dumpPaths(const std::string& job_dir, std::optional<int> rank, pid_t pid);

// The poller's part of a dump, done: the snapshot is written (or failed to be).
struct DumpStart {
  std::optional<int> rank;
  std::string host;
  pid_t pid = 0;
  std::string snapshot;  // "written", "failed: ..."
  std::chrono::steady_clock::time_point at;  // when dumping began
  // The lowest live rank of its node, with a communicator: the one that asks NCCL's RAS for
  // the node when no collector runs (a collector asks it itself).
  bool node_asks_ras = false;
};

// Carries into this rank's own state what a node peer wrote in its stead when it found the
// same process stopped (`stopped_seen_by`): the rank was frozen, then continued.
void keepPeerObservation(RankState& own, const RankState& before);

// The response HANGWATCH_ON_HANG / _COLLECT ask for: this rank's state record ("collecting",
// with the deadline readers wait until) and the collector's request.
// `before`: the state file already in place (a node peer's observation), if any.
HangResponse planResponse(const WatchdogConfig& config, const DumpPaths& paths, const DumpStart& dump,
                          std::function<bool()> job_complete, const std::optional<RankState>& before);

// What the responder does about a SIGTERM held back while dumping (TermDeferral by default).
struct TermHandling {
  std::function<bool()> pending;
  std::function<double()> pending_for_s;
  std::function<void()> release;  // restores the job's action; a held SIGTERM is sent again
};

class HangResponder {
 public:
  static constexpr int kAbortExitCode = 3;
  // After a held-back SIGTERM, the collector is waited for at most this long: launchers follow
  // SIGTERM with SIGKILL (torchrun and Slurm after 30 s by default); the collector runs on
  // in its own session and marks the rank done itself.
  static constexpr double kTermHoldS = 20;

  // `abort_comms` aborts every live communicator; `exit_process` ends the process
  // (tests replace both). Both run only for OnHang::kAbort.
  HangResponder(std::function<void()> abort_comms, std::function<void(int)> exit_process,
                TermHandling term = defaultTermHandling());

  // At most once; later calls are ignored. Marks the rank collecting on the calling thread,
  // then responds on a detached thread that owns copies of everything it uses: nothing
  // waits for it, and it outlives this object if need be.
  void start(const HangResponse& response);
  // The thread's work on the calling thread (tests).
  void respondHere(const HangResponse& response);

  static TermHandling defaultTermHandling();

 private:
  static void respond(HangResponse response, std::function<void()> abort_comms,
                      std::function<void(int)> exit_process, TermHandling term);

  std::function<void()> abort_comms_;
  std::function<void(int)> exit_process_;
  TermHandling term_;
  bool started_ = false;
};

}  // namespace hangwatch::watchdog
