#pragma once
// The dump-folder file operations (dump_fs.h) over a stream socket: RemoteDumpFs sends each
// operation to the process at the other end and waits for its answer; serveDumpFs answers
// them there with that process's own file system. The watchdog's storage thread talks to its
// helper process this way (watchdog/io_helper.h): while the helper is blocked in the kernel on
// a stalled mount, the storage thread waits in a read() on the socket, which a signal, the
// process's exit and ptrace all interrupt.
//
// Frames: a little-endian u32 length, then that many bytes. A request is an op byte and its
// fields; the answer is any number of progress frames ('p', one per system call that returned)
// and one result frame ('r').
#include <csignal>
#include <string>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch {

class RemoteDumpFs final : public DumpFs {
 public:
  // Owns `socket`. Used by one thread at a time.
  explicit RemoteDumpFs(ScopedFd socket) : socket_(std::move(socket)) {}

  // The other end went away or broke the protocol: every operation since was an error.
  bool broken() const { return broken_; }
  const std::string& brokenWhy() const { return broken_why_; }

  Expected<Written> writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                    const std::function<void()>& progress) override;
  Expected<bool> createExclusively(const std::string& path, std::string_view contents, mode_t mode) override;
  Expected<std::string> read(const std::string& path, size_t limit, bool create, mode_t mode) override;
  std::optional<FileStat> stat(const std::string& path) override;
  Expected<bool> makeDirs(const std::string& dir, mode_t mode) override;
  Expected<bool> append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                        bool sync) override;

  struct Answer;

 private:
  // Sends `request` and reads frames until the result; nothing when the socket failed.
  std::optional<Answer> ask(const std::string& request, const std::function<void()>& progress = {});

  ScopedFd socket_;
  bool broken_ = false;
  std::string broken_why_;
};

// Answers requests on `socket` with localDumpFs() until the other end closes it (0) or sends
// what is not a request (1). `parent_gone_signal` (not 0) is the signal that says the process
// served has ended (the helper's PR_SET_PDEATHSIG): an operation in flight then finishes, so
// that a file is written whole and renamed into place rather than left under its temporary
// name, and the helper exits (0) after it; idle, at once. One that has not finished within
// `bound_s` ends the helper (SIGALRM), as a stalled mount would otherwise keep it forever.
int serveDumpFs(int socket, int parent_gone_signal = 0, unsigned bound_s = 3);

// The signal the watchdog's helper gets when the rank it serves ends (its PR_SET_PDEATHSIG),
// and serves with.
inline constexpr int kHelperParentGoneSignal = SIGHUP;

}  // namespace hangwatch
