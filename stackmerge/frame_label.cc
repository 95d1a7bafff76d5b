#include "hangwatch/stackmerge/frame_label.h"

#include <charconv>

namespace hangwatch::stackmerge {

void appendFrameLabel(FrameKind kind, std::string_view function, std::string_view file, std::optional<int> line,
                      std::string_view module, std::string& out) {
  out += function.empty() ? std::string_view("??") : function;
  if (kind == FrameKind::kPython) {
    if (file.empty() && !line) return;
    out += " (";
    out += file;
    if (line) {
      char digits[16];
      auto [end, ec] = std::to_chars(digits, digits + sizeof digits, *line);
      out += ':';
      out.append(digits, end);
    }
    out += ')';
    return;
  }
  if ((function.empty() || function == "??") && !module.empty()) {
    const auto slash = module.rfind('/');
    out += " [";
    out += module.substr(slash == std::string_view::npos ? 0 : slash + 1);
    out += ']';
  }
}

void appendFrameLabel(const StackFrame& f, std::string& out) {
  appendFrameLabel(f.kind, f.function, f.file, f.line, f.module, out);
}

std::string frameLabel(const StackFrame& f) {
  std::string out;
  appendFrameLabel(f, out);
  return out;
}

}  // namespace hangwatch::stackmerge
