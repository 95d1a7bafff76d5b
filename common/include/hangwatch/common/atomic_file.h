#pragma once
// Every dump file is written to a temporary name in the same directory and
// renamed into place, so a reader never sees half a file (DESIGN.md §4). Through the calling
// thread's file system (dump_fs.h).
#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/expected.h"

namespace hangwatch {

// Creates missing parent directories. Files and folders get the dump mode (dump_mode.h)
// unless `mode` says otherwise (a file others must read, e.g. a Prometheus textfile).
Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents);
Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode);
// The same, calling `progress` after each system call that returned (a slow file system that
// moves is told from one that stalls: watchdog/dump_storage.h).
Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                      const std::function<void()>& progress);

// Creates `path` only if it does not exist yet (O_EXCL); false when another writer won.
Expected<bool> createFileExclusively(const std::string& path, std::string_view contents);

}  // namespace hangwatch
