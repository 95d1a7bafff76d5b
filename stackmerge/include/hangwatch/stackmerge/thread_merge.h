#pragma once
// Splices a thread's Python frames into its native stack where the
// interpreter's eval frames stand, folding interpreter internals away.
#include <string>
#include <vector>

#include "hangwatch/common/stack_frame.h"
#include "hangwatch/stackmerge/python_thread.h"

namespace hangwatch::stackmerge {

struct MergedThreadStack {
  std::vector<StackFrame> frames;
  std::string note;  // empty when merged cleanly, else why not (then frames == native)
};

// `native` is innermost first, each frame with function and module.
MergedThreadStack mergeThreadStack(const std::vector<StackFrame>& native, const PythonThreadStack& py);

}  // namespace hangwatch::stackmerge
