#pragma once
// One frame of a thread's stack as the collector writes it into
// ranks/rNNNNN.forensics.json (DESIGN.md §5: innermost first, as gdb's `bt`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

enum class FrameKind { kNative, kPython };

struct StackFrame {
  FrameKind kind = FrameKind::kNative;
  std::string function;           // demangled; "??" when unknown
  std::string file;               // empty when unknown
  std::optional<int> line;
  std::string module;             // native: path of the ELF object; python: empty
  std::optional<uint64_t> pc;     // native: absolute address
  std::optional<uint64_t> offset; // native: pc relative to the module's load base
};

struct ThreadStack {
  int64_t tid = 0;
  std::string name;       // Python thread name where there is one, else the OS name
  std::string os_name;    // /proc/<pid>/task/<tid>/comm
  std::string state;      // /proc state letter(s) at capture, e.g. "S", "R"
  std::string wchan;
  std::vector<StackFrame> frames;         // the merged stack (native + Python spliced)
  // Kept when a merge was not possible (then `frames` is the native stack) and for audit.
  std::vector<StackFrame> native_frames;
  std::vector<StackFrame> python_frames;
  std::string merge_note;  // empty when merged cleanly, else why not
};

nlohmann::json toJson(const StackFrame& f);
nlohmann::json toJson(const ThreadStack& t);

const char* frameKindName(FrameKind k);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct EnumNames<FrameKind> {
  static constexpr std::pair<FrameKind, std::string_view> names[] = {{FrameKind::kNative, "native"},
                                                                     {FrameKind::kPython, "python"}};
};

// A frame's fields, for StackFrame and for a reader's view of one (the same members).
template <typename Frame>
constexpr auto frameFields() {
  return std::tuple{
      field("kind", &Frame::kind, "frame kind"),
      field("function", &Frame::function, "frame function"),
      field("file", &Frame::file, "frame file", Empty::kOmit),
      field("line", &Frame::line, "frame line", Empty::kOmit),
      field("module", &Frame::module, "frame module", Empty::kOmit),
      field("pc", &Frame::pc, "frame pc", Empty::kOmit),
      field("offset", &Frame::offset, "frame offset", Empty::kOmit),
  };
}

template <>
struct Schema<StackFrame> {
  static constexpr const char* what = "frame";
  static constexpr auto fields = frameFields<StackFrame>();
  static StackFrame initial() {
    StackFrame f;
    f.function = "??";
    return f;
  }
};

template <>
struct Schema<ThreadStack> {
  static constexpr const char* what = "thread";
  static constexpr auto fields = std::tuple{
      field("tid", &ThreadStack::tid, "tid"),
      field("name", &ThreadStack::name, "thread name"),
      field("os_name", &ThreadStack::os_name, "os_name"),
      field("state", &ThreadStack::state, "state"),
      field("wchan", &ThreadStack::wchan, "wchan", Empty::kOmit),
      field("frames", &ThreadStack::frames, "frames"),
      field("native_frames", &ThreadStack::native_frames, "native_frames", Empty::kOmit),
      field("python_frames", &ThreadStack::python_frames, "python_frames", Empty::kOmit),
      field("merge_note", &ThreadStack::merge_note, "merge_note", Empty::kOmit),
  };
};

}  // namespace hangwatch::schema
