#pragma once
// Python stacks of every thread of a live CPython 3.10-3.13 process, read from
// its memory with process_vm_readv (works while a debugger holds the process).
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/stackmerge/python_thread.h"

namespace hangwatch::forensics {

struct PythonProcessStacks {
  std::string version;  // "3.11.7"
  std::vector<hangwatch::stackmerge::PythonThreadStack> threads;
};

// nullopt when the process has no CPython (e.g. ring_train); an Error with the
// reason when it has one but reading failed (unsupported version, inconsistent memory).
// Call it while the target's threads are stopped: a running interpreter moves under the reader.
Expected<std::optional<PythonProcessStacks>> readPythonStacks(pid_t pid);

}  // namespace hangwatch::forensics
