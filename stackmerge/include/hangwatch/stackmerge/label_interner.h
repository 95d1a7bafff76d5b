#pragma once
// One stored copy of every distinct frame label; callers keep small ids or views that stay
// valid for the interner's lifetime, so 16,384 ranks of near-identical stacks cost little.
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hangwatch::stackmerge {

class LabelInterner {
 public:
  uint32_t intern(std::string_view label);
  std::string_view label(uint32_t id) const { return views_[id]; }
  size_t size() const { return views_.size(); }

 private:
  std::deque<std::string> storage_;  // a deque never moves its elements, so views stay valid
  std::deque<std::string_view> views_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace hangwatch::stackmerge
