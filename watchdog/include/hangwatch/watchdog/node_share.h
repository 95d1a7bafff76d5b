#pragma once
// What the ranks of one job on one node learn from shared storage, shared through a small
// file in node-local shared memory (/dev/shm): whether the job triggered, whether every
// rank's dumps are done, and when shared storage may be looked at next. There is no leader:
// whichever rank's poller comes first after the next look-up time claims it with one CAS, so
// a node looks at shared storage at one rate whatever its number of GPUs, and a rank that
// dies never leaves the node blind. Nothing here runs on the launch path.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch::watchdog {

class NodeShare {
 public:
  // Each kind of look-up has its own schedule.
  enum class Lookup : int { kTrigger = 0, kCompletion = 1 };

  // Attaches to (or creates) the board of `job_dir`'s attempt `attempt` (attempt.h: who made
  // the attempt's ATTEMPT.json, so a later launch of the same folder never meets this board)
  // under `shm_dir`. A board whose members have all exited belongs to an earlier run: it is
  // reset. Boards of other jobs whose members have all exited (killed jobs never leave) are removed.
  // `rank`: this process's launcher rank (-1 unknown), so the others can name it if it dies.
  static Expected<std::unique_ptr<NodeShare>> attach(const std::string& job_dir,
                                                     const std::string& shm_dir = "/dev/shm",
                                                     const std::string& attempt = "", int rank = -1);
  // attach() to the board at `path`; `after_open` runs between opening the board and joining
  // it, where another process's sweep may remove a board nobody has joined yet (tests).
  static Expected<std::unique_ptr<NodeShare>> attachAt(const std::string& path, const std::string& shm_dir, int rank,
                                                       const std::function<void()>& after_open = {});
  // A board only this process sees: the fallback when shared memory cannot be used.
  static std::unique_ptr<NodeShare> unshared();

  ~NodeShare();
  NodeShare(const NodeShare&) = delete;
  NodeShare& operator=(const NodeShare&) = delete;

  // True for exactly one caller per interval on this node: that caller does the look-up.
  bool claim(Lookup which, int64_t now_ns, int64_t interval_ns);
  bool triggered() const;
  void markTriggered();
  bool complete() const;
  void markComplete();
  // The latest early warning (SUSPECT.json's episode) this node has seen announced; 0: none.
  int suspectedEpisode() const;
  void noteSuspected(int episode);
  // Shared-storage look-ups made on this node (each caller counts its own).
  void countLookup();
  uint64_t lookups() const;
  // Bytes of TRIGGER.beacon that predate this run of the job (stale lines); -1 until known.
  int64_t beaconBase() const;
  // The first caller's value wins; returns the value in place.
  int64_t setBeaconBase(int64_t bytes);

  // Members whose process has ended, in this process's pid namespace (a pid from another one
  // names some other process), with a known rank. `left`: it left at exit (its exit handler ran
  // with nothing pending); `on_term`: it passed on a SIGTERM with no GPU communication pending
  // (leaveOnTerm); otherwise it was killed, crashed or exited with GPU work in flight.
  struct GoneMember {
    int rank = -1;
    pid_t pid = 0;
    bool left = false;
    int device = -1;  // its CUDA device, -1 unknown
    bool on_term = false;
  };
  std::vector<GoneMember> goneMembers() const;
  // Members alive but stopped: /proc state T (SIGSTOP, SIGTSTP, a job-control stop), not a
  // tracer's stop ('t': a debugger attached, this rank's own collector among them). Frozen,
  // they answer nothing. In this process's pid namespace, with a known rank.
  struct StoppedMember {
    int rank = -1;
    pid_t pid = 0;
    int device = -1;
  };
  std::vector<StoppedMember> stoppedMembers() const;
  // What this process learned of itself after it joined: its rank (launcher or, without a
  // launcher, communicator rank; kept when the board already has one) and its CUDA device.
  void noteIdentity(int rank, int device);
  // The launcher ranks of every member that ever joined, live or gone, ascending.
  std::vector<int> memberRanks() const;

  // Marks this process as left (it stays listed, to be named if the others still need it); the
  // last live member to leave removes the board's file.
  void leave();
  // As leave(), just before a SIGTERM this process held ends it: the others then say it ended
  // on the launcher's signal, not that it was killed or crashed.
  void leaveOnTerm();
  const std::string& path() const { return path_; }
  bool shared() const { return fd_.valid(); }

  struct Layout;

 private:
  NodeShare(Layout* layout, ScopedFd fd, std::string path)
      : layout_(layout), fd_(std::move(fd)), path_(std::move(path)) {}

  void leaveAs(uint8_t how);

  Layout* layout_;
  ScopedFd fd_;  // none for an unshared board
  std::string path_;
  bool left_ = false;
};

// When process `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat): with the
// pid, it names the process for good (pids are reused). 0 when it is gone, a zombie, or /proc
// cannot tell.
uint64_t processStartTicks(pid_t pid);

// "/dev/shm/hangwatch-<uid>-<hash of the absolute job dir, the attempt and the host name>".
std::string nodeSharePath(const std::string& job_dir, const std::string& shm_dir = "/dev/shm",
                          const std::string& attempt = "");

}  // namespace hangwatch::watchdog
