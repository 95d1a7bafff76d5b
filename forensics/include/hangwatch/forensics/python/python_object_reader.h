#pragma once
// Reads CPython objects (str, bytes, int, dict, instance attributes) out of a
// stopped process. Every read is bounded; anything implausible reads as absent.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hangwatch/forensics/python/process_memory.h"
#include "hangwatch/forensics/python/python_layout.h"

namespace hangwatch::forensics {

class PythonObjectReader {
 public:
  PythonObjectReader(ProcessMemory& memory, const PythonLayout& layout) : memory_(memory), layout_(layout) {}

  ProcessMemory& memory() { return memory_; }

  std::optional<std::string> unicode(uint64_t addr);
  std::optional<std::string> bytes(uint64_t addr, size_t limit);
  std::optional<std::string> typeName(uint64_t obj);
  bool hasTypeNamed(uint64_t obj, const std::string& name);
  // Non-negative ints up to 64 bits (thread idents).
  std::optional<uint64_t> unsignedLong(uint64_t addr);
  // (key, value) object pointers of a dict, in entry order.
  std::vector<std::pair<uint64_t, uint64_t>> dictItems(uint64_t dict);
  std::optional<uint64_t> dictGet(uint64_t dict, const std::string& key);
  // The value of an instance attribute stored in its __dict__ (also 3.11+ managed and inline dicts).
  std::optional<uint64_t> attribute(uint64_t obj, const std::string& name);

  static constexpr size_t kMaxDictEntries = 1 << 16;

 private:
  std::vector<std::pair<uint64_t, uint64_t>> keysItems(uint64_t keys, uint64_t values);
  std::optional<uint64_t> findKey(const std::vector<std::pair<uint64_t, uint64_t>>& items, const std::string& key);

  ProcessMemory& memory_;
  const PythonLayout& layout_;
  std::unordered_map<uint64_t, std::string> type_names_;
};

bool plausiblePythonPointer(uint64_t p);

}  // namespace hangwatch::forensics
