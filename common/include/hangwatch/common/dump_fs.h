#pragma once
// The file operations hangwatch does on a dump folder, as one interface. Code that reads or
// writes dump files (atomic_file.h, attempt.h, the trigger beacon, rank states) calls
// dumpFs(): the calling thread's file system. That is this process's own, unless the thread
// set another: the watchdog's storage thread sets one that sends each operation to a helper
// process (dump_fs_remote.h), so that a mount which stalls forever holds that process in the
// kernel, never a thread of the training job (which could then neither exit nor stop under
// the collector's ptrace).
//
// The operations are whole ones (write a file atomically, read a file, append a line) rather
// than open/write/close, so that no file descriptor on the dump folder is ever held by the
// thread that asked.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "hangwatch/common/expected.h"

namespace hangwatch {

// Where a file was written.
struct Written {
  std::string path;
};

struct FileStat {
  double mtime_unix_s = 0;
  uint64_t size = 0;
  bool is_dir = false;
};

class DumpFs {
 public:
  virtual ~DumpFs() = default;

  // A temporary name in the same folder, renamed into place (folders made when missing);
  // `progress` is called after each system call that returned.
  virtual Expected<Written> writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                            const std::function<void()>& progress) = 0;
  // Written under a private name, then link()ed into place: false when `path` exists already.
  virtual Expected<bool> createExclusively(const std::string& path, std::string_view contents, mode_t mode) = 0;
  // Up to `limit` bytes of the file. With `create`, a missing file is made empty (its folders
  // too) and read as such. The error of a missing file starts with "no such file".
  virtual Expected<std::string> read(const std::string& path, size_t limit, bool create, mode_t mode) = 0;
  // Nothing when `path` cannot be stat()ed (missing, or a folder on the way is unreadable).
  virtual std::optional<FileStat> stat(const std::string& path) = 0;
  // `dir` and its missing parents, each with `mode`; true when one was made.
  virtual Expected<bool> makeDirs(const std::string& dir, mode_t mode) = 0;
  // Appends `text` (a file made with `mode`, its folders too, when missing). `keep_open` keeps
  // the file open for the next append to the same path (a metrics stream); `sync` flushes it
  // to the server before returning (a line readers on other nodes wait for).
  virtual Expected<bool> append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                                bool sync) = 0;
};

// This process's own file system calls (thread-safe).
DumpFs& localDumpFs();
// The calling thread's: localDumpFs() unless a ThreadDumpFs is in force on this thread.
DumpFs& dumpFs();

// For its lifetime, dumpFs() on this thread is `fs` (which must outlive it).
class ThreadDumpFs {
 public:
  explicit ThreadDumpFs(DumpFs* fs);
  ~ThreadDumpFs();
  ThreadDumpFs(const ThreadDumpFs&) = delete;
  ThreadDumpFs& operator=(const ThreadDumpFs&) = delete;

 private:
  DumpFs* previous_;
};

}  // namespace hangwatch
