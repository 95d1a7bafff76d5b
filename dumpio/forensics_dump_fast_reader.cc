#include "hangwatch/dumpio/forensics_dump_fast_reader.h"

#include <simdjson.h>

#include <optional>
#include <string>
#include <utility>

#include "hangwatch/dumpio/record_reader.h"

namespace hangwatch::dumpio {
namespace {

static_assert(kFastReaderPadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

// A frame as the report needs it: views into the parser's buffer, never copied out.
struct FrameView {
  FrameKind kind = FrameKind::kNative;
  std::string_view function = "??";
  std::string_view file;
  std::optional<int> line;
  std::string_view module;
  std::optional<uint64_t> pc;
  std::optional<uint64_t> offset;
};

}  // namespace
}  // namespace hangwatch::dumpio

template <>
struct hangwatch::schema::Schema<hangwatch::dumpio::FrameView> {
  static constexpr const char* what = "frame";
  static constexpr auto fields = frameFields<hangwatch::dumpio::FrameView>();
};

namespace hangwatch::dumpio {
namespace {

constexpr std::string_view kThreads = schema::keyOf(&ForensicsDump::threads);
constexpr std::string_view kFrames = schema::keyOf(&ThreadStack::frames);
constexpr std::string_view kNativeFrames = schema::keyOf(&ThreadStack::native_frames);
constexpr std::string_view kPythonFrames = schema::keyOf(&ThreadStack::python_frames);

// ForensicsDump (DESIGN.md §5) by its field list, but for how the report keeps stacks: the
// merged frames interned straight into a stack table, the raw ones skipped unread.
class DumpReader : public RecordReader {
 public:
  explicit DumpReader(FastReadOptions options) : options_(options) {}

  bool dump(od::object o, ForensicsDump& d) {
    return record(o, d, "forensics dump", [&](std::string_view k, od::value m) -> std::optional<bool> {
      if (!is(k, kThreads)) return std::nullopt;
      d.threads.clear();
      if (options_.stack_ids) options_.stack_ids->clear();
      return array(m, "threads", [&](od::value e) { return thread(e, d.threads.emplace_back()); });
    });
  }

 private:
  bool thread(od::value v, ThreadStack& t) {
    const bool intern = options_.stacks && options_.stack_ids;
    if (intern) stack_.clear();
    const bool ok = record(v, t, "thread", [&](std::string_view k, od::value m) -> std::optional<bool> {
      if (intern && is(k, kFrames)) {
        stack_.clear();
        return array(m, "frames", [&](od::value e) { return frameInto(e, stack_); });
      }
      if (options_.skip_raw_frames && (is(k, kNativeFrames) || is(k, kPythonFrames))) return true;
      return std::nullopt;
    });
    if (ok && intern) options_.stack_ids->push_back(options_.stacks->intern(stack_));
    return ok;
  }

  bool frameInto(od::value v, stackmerge::StackTable::Builder& stack) {
    FrameView f;
    if (!record(v, f, "frame")) return false;
    stack.add(f.kind, f.function, f.file, f.line, f.module);
    return true;
  }

 private:
  FastReadOptions options_;
  stackmerge::StackTable::Builder stack_;
};

}  // namespace

Expected<ForensicsDump> forensicsDumpFromPaddedText(std::string_view text, FastReadOptions options) {
  // A parser keeps its buffers between documents; one per loader thread.
  thread_local od::parser parser;
  od::document doc;
  od::object o;
  if (std::optional<std::string> e = openObject(parser, doc, text, o)) return Error{"forensics dump: " + *e};
  if (options.stack_ids) options.stack_ids->clear();
  DumpReader fields(options);
  ForensicsDump d;
  if (!fields.dump(o, d)) return Error{"forensics dump: " + fields.error()};
  if (!endsAfter(doc)) return Error{"forensics dump: text after the dump"};
  return d;
}

Expected<ForensicsDump> forensicsDumpFromTextFast(std::string_view text, FastReadOptions options) {
  thread_local std::string padded;
  padded.assign(text.data(), text.size());
  padded.resize(text.size() + kFastReaderPadding);
  return forensicsDumpFromPaddedText(std::string_view(padded.data(), text.size()), options);
}

}  // namespace hangwatch::dumpio
