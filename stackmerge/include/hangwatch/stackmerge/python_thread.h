#pragma once
// The Python side of one thread as read from a live interpreter's memory,
// ready to be spliced into that thread's native stack.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/stack_frame.h"

namespace hangwatch::stackmerge {

struct PythonThreadStack {
  std::optional<int64_t> native_tid;  // 3.11+: PyThreadState.native_thread_id
  uint64_t pthread_id = 0;  // PyThreadState.thread_id: glibc pthread_t == the thread's fs_base on x86-64
  std::string name;         // threading.Thread name when found
  std::vector<StackFrame> frames;  // kind python, innermost first, function/file/line
  // Frames run by each _PyEval_EvalFrameDefault activation, innermost first;
  // sums to frames.size().
  std::vector<size_t> eval_group_sizes;
};

}  // namespace hangwatch::stackmerge
