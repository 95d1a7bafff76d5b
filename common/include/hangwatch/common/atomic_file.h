#pragma once
// Every dump file is written to a temporary name in the same directory and
// renamed into place, so a reader never sees half a file (DESIGN.md §4).
#include <string>
#include <string_view>

#include "hangwatch/common/expected.h"

namespace hangwatch {

struct Written {
  std::string path;
};

// Creates missing parent directories.
Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents);

// Creates `path` only if it does not exist yet (O_EXCL); false when another writer won.
Expected<bool> createFileExclusively(const std::string& path, std::string_view contents);

}  // namespace hangwatch
