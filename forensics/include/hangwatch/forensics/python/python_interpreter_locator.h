#pragma once
// Finds the CPython runtime inside a process: the mapped executable or
// libpython that defines _PyRuntime, where it is loaded, and which version it is.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

struct InterpreterLocation {
  std::string path;      // the ELF object that defines _PyRuntime, as mapped
  int minor = -1;        // 3.<minor> from the object's name; -1 when the name does not say
  uint64_t runtime_addr = 0;              // &_PyRuntime in the target
  std::optional<uint64_t> py_version_addr;  // &Py_Version (3.11+)
};

// nullopt when no python executable or libpython is mapped.
Expected<std::optional<InterpreterLocation>> locateInterpreter(pid_t pid);

}  // namespace hangwatch::forensics
