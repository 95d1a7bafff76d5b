#pragma once
// The dump folder is shared storage, and a hang often comes with a storage problem: a mount
// that stalls for minutes, a full quota, a read-only remount. Every file operation the
// watchdog does there goes through this class, on a thread of its own ("hangwatch-io"), so
// that no application thread ever waits on the dump folder and no watchdog thread waits on a
// system call there that has not returned within the deadline (HANGWATCH_STORAGE_DEADLINE): a
// slow mount whose calls each return in time is slow, not stalled. That thread hands each
// system call to a helper process (io_helper.h): a call that never returns holds the helper,
// not a thread of the rank, which can then still exit and stop under ptrace. When the folder fails (an error while writing) or stalls (an
// operation past the deadline) the rank's files go to the same place under a node-local
// fallback folder (HANGWATCH_FALLBACK_DIR) from then on; `forensics report --fallback` reads
// both. The switch is for the rest of the process: a rank's files are then in one place, and
// a mount that came back is not trusted with the dump that matters.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/expected.h"
#include "hangwatch/common/rank_identity.h"

namespace hangwatch::watchdog {

struct DumpStorageConfig {
  std::string primary;   // the job's folder on shared storage ($HANGWATCH_DUMP_DIR/<job-id>)
  std::string fallback;  // its node-local stand-in ($HANGWATCH_FALLBACK_DIR/<job-id>)
  double deadline_s = 10;
  // The `forensics` binary whose `io-helper` does the storage thread's file operations in a
  // process of its own (io_helper.h); empty: the storage thread does them itself.
  std::string io_helper;
};

// HANGWATCH_FALLBACK_DIR, else $TMPDIR/hangwatch-fallback, else /var/tmp/hangwatch-fallback.
std::string fallbackRootFromEnv(const EnvLookup& env);

class DumpStorage {
 public:
  explicit DumpStorage(DumpStorageConfig config);
  ~DumpStorage();
  DumpStorage(const DumpStorage&) = delete;
  DumpStorage& operator=(const DumpStorage&) = delete;

  // Told once, from whichever thread noticed, why the dump folder was given up and where
  // the files go instead.
  void onFallback(std::function<void(const std::string& why, const std::string& fallback)> fn);

  // Runs `op` (which must own what it uses: it may outlive this call) on the storage thread
  // and waits for it while that thread makes progress. Once the folder is given up, an error
  // at once, `op` not run. When the thread's current operation made no progress for the
  // deadline, the folder is given up (stalled) and the answer is an error. Each dump-folder
  // operation `op` does through dumpFs() is a step (a slow mount that moves is not stalled);
  // what it does between them counts against the deadline.
  // An error `op` returns is only passed on: a file that is not there is no storage failure.
  template <typename T>
  Expected<T> call(const std::string& what, std::function<Expected<T>()> op) {
    auto result = std::make_shared<std::optional<Expected<T>>>();
    std::string error = runBounded(what, [op = std::move(op), result] { result->emplace(op()); });
    if (!error.empty()) return Error{error};
    return std::move(**result);
  }

  // Writes `contents` whole at `path` (a temporary name renamed into place). A path under the
  // primary folder that cannot be written there goes to its place under the fallback, and
  // the folder is given up. Returns where the file went.
  Expected<Written> write(const std::string& path, std::string contents);
  Expected<Written> write(const std::string& path, std::string contents, mode_t mode);
  // Queued, never waited for (metrics): lines are appended in order, a whole file queued
  // again replaces the queued one, and a stall or failure sends these to the fallback as well.
  void writeLater(const std::string& path, std::string contents);
  void appendLater(const std::string& path, std::string line);

  // Where a file of the primary folder goes now: `path` itself, or its fallback place.
  std::string place(const std::string& path) const;
  // Gives the folder up (e.g. it could not even be set up at start).
  void giveUp(const std::string& why);
  bool fellBack() const;
  std::string fallbackRoot() const;
  std::string why() const;
  // Appended lines lost: the one a stalled write held when the folder was given up.
  uint64_t linesLost() const;
  // For tests: the queued and running operations are done (true) within `seconds`.
  bool drain(double seconds);
  // The process is about to end without its exit handlers (_exit, HANGWATCH_ON_HANG=abort):
  // nothing queued or new is written any more (a waited write answers an error), and the
  // operation in flight, here or on the node-local fallback, gets up to `seconds` to finish,
  // so that no temporary file is left half written. True: nothing was still running.
  bool close(double seconds);
  // The helper process doing the file operations, once started (0: none, or not yet).
  pid_t ioHelperPid() const;

 private:
  struct Shared;
  struct Task;
  std::string runBounded(const std::string& what, std::function<void()> op);
  // False: dropped (closed, or the queue is full).
  bool enqueue(std::shared_ptr<Task> task);
  bool closing() const;
  void checkStalled();
  void fallBack(const std::string& why);
  std::shared_ptr<Shared> shared_;
};

}  // namespace hangwatch::watchdog
