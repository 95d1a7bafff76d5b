#pragma once
// How one frame is named when stacks are compared across ranks.
#include <optional>
#include <string>
#include <string_view>

#include "hangwatch/common/stack_frame.h"

namespace hangwatch::stackmerge {

// Frame label used by the cross-rank merge: function, plus "file:line" for Python frames
// ("step (train.py:42)"). An unnamed native frame keeps its module ("?? [libfoo.so]") so
// two different unknown libraries do not look alike.
std::string frameLabel(const StackFrame& f);
// The same, appended to `out`, so a hot loop can reuse one buffer.
void appendFrameLabel(const StackFrame& f, std::string& out);
// The same from the frame's fields, for readers that never build a StackFrame.
void appendFrameLabel(FrameKind kind, std::string_view function, std::string_view file, std::optional<int> line,
                      std::string_view module, std::string& out);

}  // namespace hangwatch::stackmerge
