#include "hangwatch/forensics/python/python_stack_reader.h"

#include <unordered_set>

#include "hangwatch/forensics/python/code_line_table.h"
#include "hangwatch/forensics/python/python_thread_names.h"

namespace hangwatch::forensics {

const PythonStackReader::CodeInfo* PythonStackReader::code(uint64_t code_addr) {
  if (auto it = codes_.find(code_addr); it != codes_.end()) return &it->second;
  if (!plausiblePythonPointer(code_addr) || !objects_.hasTypeNamed(code_addr, "code")) return nullptr;
  CodeInfo info;
  auto name_ptr = memory_.readPointer(code_addr + layout_.code_name);
  auto file_ptr = memory_.readPointer(code_addr + layout_.code_filename);
  auto first_line = memory_.readValue<int32_t>(code_addr + layout_.code_firstlineno);
  auto table_ptr = memory_.readPointer(code_addr + layout_.code_linetable);
  if (!name_ptr || !file_ptr || !first_line || !table_ptr) return nullptr;
  info.function = objects_.unicode(*name_ptr).value_or("??");
  info.file = objects_.unicode(*file_ptr).value_or("");
  info.first_line = *first_line;
  info.line_table = objects_.bytes(*table_ptr, 1 << 20).value_or("");
  if (layout_.code_code_adaptive) info.instructions = code_addr + *layout_.code_code_adaptive;
  return &codes_.emplace(code_addr, std::move(info)).first->second;
}

Expected<uint64_t> PythonStackReader::currentFrame(uint64_t tstate) {
  auto first = memory_.readPointer(tstate + layout_.tstate_frame);
  if (!first) return Error{"unreadable PyThreadState"};
  if (!layout_.cframe_current_frame || *first == 0) return *first;
  // 3.11/3.12: the thread state points at a _PyCFrame, which points at the frame.
  auto frame = memory_.readPointer(*first + *layout_.cframe_current_frame);
  if (!frame) return Error{"unreadable _PyCFrame"};
  return *frame;
}

Expected<stackmerge::PythonThreadStack> PythonStackReader::readThread(uint64_t tstate) {
  stackmerge::PythonThreadStack thread;
  auto thread_id = memory_.readValue<uint64_t>(tstate + layout_.tstate_thread_id);
  if (!thread_id) return Error{"unreadable PyThreadState.thread_id"};
  thread.pthread_id = *thread_id;
  if (layout_.tstate_native_thread_id) {
    auto native = memory_.readValue<uint64_t>(tstate + *layout_.tstate_native_thread_id);
    if (native && *native != 0) thread.native_tid = static_cast<int64_t>(*native);
  }
  auto frame = currentFrame(tstate);
  if (!frame) return Error{frame.error()};

  const bool legacy_frames = layout_.minor <= 10;
  size_t group = 0;
  std::unordered_set<uint64_t> seen;
  for (uint64_t f = *frame; f != 0; ) {
    if (!plausiblePythonPointer(f) || !seen.insert(f).second || seen.size() > kMaxFrames)
      return Error{"corrupt frame chain"};
    auto previous = memory_.readPointer(f + layout_.frame_previous);
    auto code_addr = memory_.readPointer(f + layout_.frame_code);
    if (!previous || !code_addr) return Error{"unreadable frame"};
    std::optional<char> owner;
    if (layout_.frame_owner) owner = memory_.readValue<char>(f + *layout_.frame_owner);

    if (owner && *owner == kFrameOwnedByCStack) {
      // 3.12+: the shim frame an eval activation pushes on entry closes its group.
      thread.eval_group_sizes.push_back(group);
      group = 0;
      f = *previous;
      continue;
    }
    const CodeInfo* info = code(*code_addr);
    if (info == nullptr) return Error{"frame without a readable code object"};
    StackFrame out;
    out.kind = FrameKind::kPython;
    out.function = info->function;
    out.file = info->file;
    if (legacy_frames) {
      auto lasti = memory_.readValue<int32_t>(f + layout_.frame_instr);
      if (lasti && *lasti < 0) out.line = info->first_line;
      if (lasti && *lasti >= 0) out.line = lineFromLineTable310(info->line_table, info->first_line, uint64_t(*lasti) * 2);
    } else {
      auto instr = memory_.readPointer(f + layout_.frame_instr);
      // A frame that has not run its first instruction points before the code.
      if (instr && *instr < info->instructions) out.line = info->first_line;
      if (instr && *instr >= info->instructions)
        out.line = lineFromLocationTable(info->line_table, info->first_line, (*instr - info->instructions) / 2);
    }
    thread.frames.push_back(std::move(out));
    ++group;
    bool ends_group = legacy_frames;  // 3.10: one eval activation per frame
    if (layout_.frame_is_entry) {
      auto is_entry = memory_.readValue<uint8_t>(f + *layout_.frame_is_entry);
      ends_group = is_entry && *is_entry != 0;
    }
    if (ends_group) {
      thread.eval_group_sizes.push_back(group);
      group = 0;
    }
    f = *previous;
  }
  if (group > 0) thread.eval_group_sizes.push_back(group);
  return thread;
}

Expected<std::vector<stackmerge::PythonThreadStack>> PythonStackReader::readThreads(uint64_t runtime_addr) {
  std::vector<stackmerge::PythonThreadStack> threads;
  auto interp = memory_.readPointer(runtime_addr + layout_.runtime_interpreters_head);
  if (!interp) return Error{"unreadable _PyRuntime"};
  const uint64_t first_interp = *interp;
  std::unordered_set<uint64_t> seen_interps, seen_threads;
  for (uint64_t i = *interp; i != 0; ) {
    if (!plausiblePythonPointer(i) || !seen_interps.insert(i).second || seen_interps.size() > kMaxInterpreters)
      return Error{"corrupt interpreter list"};
    auto tstate = memory_.readPointer(i + layout_.interp_threads_head);
    if (!tstate) return Error{"unreadable PyInterpreterState"};
    for (uint64_t t = *tstate; t != 0; ) {
      if (!plausiblePythonPointer(t) || !seen_threads.insert(t).second || seen_threads.size() > kMaxThreads)
        return Error{"corrupt thread state list"};
      auto thread = readThread(t);
      if (!thread) return Error{thread.error()};
      threads.push_back(std::move(*thread));
      auto next = memory_.readPointer(t + layout_.tstate_next);
      if (!next) return Error{"unreadable PyThreadState.next"};
      t = *next;
    }
    auto next = memory_.readPointer(i + layout_.interp_next);
    if (!next) return Error{"unreadable PyInterpreterState.next"};
    i = *next;
  }
  if (first_interp != 0) {
    const auto names = readPythonThreadNames(objects_, layout_, first_interp);
    for (auto& t : threads)
      if (auto it = names.find(t.pthread_id); it != names.end()) t.name = it->second;
  }
  return threads;
}

}  // namespace hangwatch::forensics
