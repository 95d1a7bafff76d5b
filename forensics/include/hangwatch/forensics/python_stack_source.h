#pragma once
// The collector's view of the Python side: reads every Python thread of the target
// (while the fast pass holds it stopped) and splices each into the native stack of
// the thread it runs on. Hides whether this build has the Python reader at all.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/stack_frame.h"

namespace hangwatch::forensics {

class PythonStackSource {
 public:
  PythonStackSource();
  ~PythonStackSource();

  static bool available();  // false when this build lacks the reader (forensics/python)

  // true when the process runs CPython and its stacks were read; false when it has none.
  Expected<bool> read(pid_t pid);
  std::string version() const;

  // Matches the Python thread running on native thread `thread.tid` (by native thread
  // id, else by pthread_t == fs_base) and merges it into `thread`; false when none runs there.
  bool mergeInto(ThreadStack& thread, uint64_t fs_base) const;
  // Python threads no native thread claimed (should not happen; kept for the dump's errors).
  size_t unmatchedThreads() const;

 private:
  struct Snapshot;
  std::unique_ptr<Snapshot> snapshot_;
};

}  // namespace hangwatch::forensics
