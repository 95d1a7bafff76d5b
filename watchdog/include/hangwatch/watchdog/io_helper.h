#pragma once
// The storage thread's file system (dump_fs.h): a helper process, `forensics io-helper`, that
// does every operation on the dump folder and answers over a socket (dump_fs_remote.h).
// A mount that stalls forever then holds the helper in the kernel (D state), never a thread of
// the training process: the storage thread waits in read() on the socket, which the process's
// exit and the collector's ptrace both interrupt, so the rank can still exit and be stopped,
// and the helper goes with it (SIGKILL when the thread that started it ends).
//
// When the helper cannot be started or goes away, the operations run here, on the calling
// thread, as they would without one (said once through `tell`).
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/dump_fs_remote.h"

namespace hangwatch::watchdog {

class IoHelper final : public DumpFs {
 public:
  using Tell = std::function<void(const std::string&)>;
  // Starts `forensics io-helper` from `forensics_binary`. Call it on the thread that will use
  // it, for as long as the helper is wanted: the helper ends with that thread.
  static Expected<std::unique_ptr<IoHelper>> start(const std::string& forensics_binary, Tell tell);
  ~IoHelper() override;

  pid_t pid() const { return pid_; }
  // The helper went away and the operations run here since.
  bool gone() const { return remote_.broken(); }

  Expected<Written> writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                    const std::function<void()>& progress) override;
  Expected<bool> createExclusively(const std::string& path, std::string_view contents, mode_t mode) override;
  Expected<std::string> read(const std::string& path, size_t limit, bool create, mode_t mode) override;
  std::optional<FileStat> stat(const std::string& path) override;
  Expected<bool> makeDirs(const std::string& dir, mode_t mode) override;
  Expected<bool> append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                        bool sync) override;

 private:
  IoHelper(ScopedFd socket, pid_t pid, Tell tell) : remote_(std::move(socket)), pid_(pid), tell_(std::move(tell)) {}
  // The helper's answer, or (once it is gone) the same operation done here.
  template <typename R>
  R either(const std::function<R(DumpFs&)>& op);

  RemoteDumpFs remote_;
  pid_t pid_;
  Tell tell_;
  bool told_ = false;
};

}  // namespace hangwatch::watchdog
