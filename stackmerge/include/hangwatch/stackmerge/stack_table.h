#pragma once
// Every distinct thread stack of a job, stored once as (kind, label) frames: 16,384 ranks of
// 16 threads share a few hundred stacks, so a rank keeps one id per thread instead of ~500
// frames of strings. Loader threads intern into one table at the same time.
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hangwatch/stackmerge/label_interner.h"
#include "hangwatch/common/rank_record.h"
#include "hangwatch/common/stack_frame.h"

namespace hangwatch::stackmerge {

struct TableFrame {
  FrameKind kind = FrameKind::kNative;
  std::string_view label;  // frameLabel() of the frame; owned by the table
};

// One thread of one rank as a report keeps it (common/rank_record.h).
using RankThread = ::hangwatch::RankThread;

class StackTable {
 public:
  // One stack's frames, innermost first, gathered before interning; a loader thread reuses one.
  class Builder {
   public:
    void clear() { key_.clear(); }
    void add(FrameKind kind, std::string_view function, std::string_view file, std::optional<int> line,
             std::string_view module);
    void add(const StackFrame& f);
    // A frame already reduced to its label (a node summary's).
    void addLabel(FrameKind kind, std::string_view label);

   private:
    friend class StackTable;
    std::string key_;  // per frame: kind byte, label length (4 bytes), label
  };

  uint32_t intern(const Builder& stack);
  uint32_t intern(const std::vector<StackFrame>& frames);
  // The frames of a stack, innermost first; valid for the table's lifetime.
  std::span<const TableFrame> frames(uint32_t stack) const;
  std::vector<std::string> labels(uint32_t stack) const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::deque<std::vector<TableFrame>> stacks_;  // a deque never moves its elements
  LabelInterner labels_;
};

}  // namespace hangwatch::stackmerge
