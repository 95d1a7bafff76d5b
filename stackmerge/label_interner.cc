#include "hangwatch/stackmerge/label_interner.h"

namespace hangwatch::stackmerge {

uint32_t LabelInterner::intern(std::string_view label) {
  auto it = ids_.find(label);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(views_.size());
  const std::string_view stored = storage_.emplace_back(label);
  views_.push_back(stored);
  ids_.emplace(stored, id);
  return id;
}

}  // namespace hangwatch::stackmerge
