#include "hangwatch/stackmerge/stack_table.h"

#include <cstring>

#include "hangwatch/stackmerge/frame_label.h"

namespace hangwatch::stackmerge {

void StackTable::Builder::add(FrameKind kind, std::string_view function, std::string_view file,
                              std::optional<int> line, std::string_view module) {
  key_ += static_cast<char>(kind == FrameKind::kPython ? 'p' : 'n');
  const size_t length_at = key_.size();
  key_.append(sizeof(uint32_t), '\0');
  appendFrameLabel(kind, function, file, line, module, key_);
  const auto length = static_cast<uint32_t>(key_.size() - length_at - sizeof(uint32_t));
  std::memcpy(key_.data() + length_at, &length, sizeof length);
}

void StackTable::Builder::add(const StackFrame& f) { add(f.kind, f.function, f.file, f.line, f.module); }

void StackTable::Builder::addLabel(FrameKind kind, std::string_view label) {
  key_ += static_cast<char>(kind == FrameKind::kPython ? 'p' : 'n');
  const auto length = static_cast<uint32_t>(label.size());
  key_.append(reinterpret_cast<const char*>(&length), sizeof length);
  key_.append(label);
}

uint32_t StackTable::intern(const Builder& stack) {
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(stack.key_); it != ids_.end()) return it->second;
  std::vector<TableFrame> frames;
  const std::string& key = stack.key_;
  for (size_t at = 0; at < key.size();) {
    TableFrame f;
    f.kind = key[at] == 'p' ? FrameKind::kPython : FrameKind::kNative;
    uint32_t length = 0;
    std::memcpy(&length, key.data() + at + 1, sizeof length);
    at += 1 + sizeof length;
    f.label = labels_.label(labels_.intern(std::string_view(key).substr(at, length)));
    at += length;
    frames.push_back(f);
  }
  const auto id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back(std::move(frames));
  ids_.emplace(key, id);
  return id;
}

uint32_t StackTable::intern(const std::vector<StackFrame>& frames) {
  Builder b;
  for (const StackFrame& f : frames) b.add(f);
  return intern(b);
}

std::span<const TableFrame> StackTable::frames(uint32_t stack) const {
  std::lock_guard lock(mutex_);
  return stacks_.at(stack);
}

std::vector<std::string> StackTable::labels(uint32_t stack) const {
  std::vector<std::string> out;
  for (const TableFrame& f : frames(stack)) out.emplace_back(f.label);
  return out;
}

size_t StackTable::size() const {
  std::lock_guard lock(mutex_);
  return stacks_.size();
}

}  // namespace hangwatch::stackmerge
