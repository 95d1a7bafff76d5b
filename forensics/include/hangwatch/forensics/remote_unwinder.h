#pragma once
// Unwinds the native stacks of a process whose threads we hold in ptrace stops,
// from outside, with elfutils' libdwfl (the engine of eu-stack): CFI from
// .eh_frame/.debug_frame, symbols from ELF, file:line from DWARF where present.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/forensics/wait_manager.h"
#include "hangwatch/common/stack_frame.h"

struct Dwfl;

namespace hangwatch::forensics {

struct UnwoundStack {
  std::vector<StackFrame> frames;  // innermost first
  std::string error;               // why the unwind ended early; empty when it reached the outermost frame
};

class RemoteUnwinder {
 public:
  // Reports the modules of /proc/<pid>/maps; the threads must already be ptrace-stopped by this thread.
  static Expected<std::unique_ptr<RemoteUnwinder>> forStoppedProcess(pid_t pid);
  ~RemoteUnwinder();
  RemoteUnwinder(const RemoteUnwinder&) = delete;
  RemoteUnwinder& operator=(const RemoteUnwinder&) = delete;

  UnwoundStack unwind(pid_t tid, Deadline deadline, size_t max_frames = 256);

 private:
  RemoteUnwinder(pid_t pid, Dwfl* dwfl) : pid_(pid), dwfl_(dwfl) {}
  static Expected<Dwfl*> openProcess(pid_t pid);
  // `lookup_pc` is pc-1 for a caller frame, so a call at the end of a function names that function.
  // More than one frame when calls were inlined at pc (innermost first).
  std::vector<StackFrame> symbolize(uint64_t pc, uint64_t lookup_pc);

  pid_t pid_;
  Dwfl* dwfl_;  // null after a failed unwind: reopened for the next thread
  std::unordered_map<uint64_t, std::vector<StackFrame>> symbols_;  // by lookup pc: threads share most frames
};

}  // namespace hangwatch::forensics
