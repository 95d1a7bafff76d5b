#include "hangwatch/common/atomic_file.h"

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/dump_mode.h"

namespace hangwatch {

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents) {
  return writeFileAtomically(path, contents, dumpFileMode());
}

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode) {
  return writeFileAtomically(path, contents, mode, {});
}

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                      const std::function<void()>& progress) {
  return dumpFs().writeAtomically(path, contents, mode, progress);
}

Expected<bool> createFileExclusively(const std::string& path, std::string_view contents) {
  return dumpFs().createExclusively(path, contents, dumpFileMode());
}

}  // namespace hangwatch
