#pragma once
// How one frame is named when stacks are compared across ranks.
#include <string>

#include "hangwatch/stack_frame.h"

namespace hangwatch::stackmerge {

// Frame label used by the cross-rank merge: function, plus "file:line" for Python frames
// ("step (train.py:42)"). An unnamed native frame keeps its module ("?? [libfoo.so]") so
// two different unknown libraries do not look alike.
std::string frameLabel(const StackFrame& f);
// The same, appended to `out`, so a hot loop can reuse one buffer.
void appendFrameLabel(const StackFrame& f, std::string& out);

}  // namespace hangwatch::stackmerge
