#include "hangwatch/frame_label.h"

#include <charconv>

namespace hangwatch::stackmerge {

void appendFrameLabel(const StackFrame& f, std::string& out) {
  out += f.function.empty() ? std::string_view("??") : std::string_view(f.function);
  if (f.kind == FrameKind::kPython) {
    if (f.file.empty() && !f.line) return;
    out += " (";
    out += f.file;
    if (f.line) {
      char digits[16];
      auto [end, ec] = std::to_chars(digits, digits + sizeof digits, *f.line);
      out += ':';
      out.append(digits, end);
    }
    out += ')';
    return;
  }
  if ((f.function.empty() || f.function == "??") && !f.module.empty()) {
    const auto slash = f.module.rfind('/');
    out += " [";
    out += std::string_view(f.module).substr(slash == std::string::npos ? 0 : slash + 1);
    out += ']';
  }
}

std::string frameLabel(const StackFrame& f) {
  std::string out;
  appendFrameLabel(f, out);
  return out;
}

}  // namespace hangwatch::stackmerge
