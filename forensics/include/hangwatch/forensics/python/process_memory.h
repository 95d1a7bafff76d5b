#pragma once
// Reads another process's memory with process_vm_readv, a page at a time,
// keeping the pages it read: a stack walk touches the same few pages over and over.
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace hangwatch::forensics {

class ProcessMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}

  // False when any byte of [addr, addr+len) is unreadable.
  bool read(uint64_t addr, void* out, size_t len);

  template <typename T>
  std::optional<T> readValue(uint64_t addr) {
    T value;
    if (!read(addr, &value, sizeof(value))) return std::nullopt;
    return value;
  }
  std::optional<uint64_t> readPointer(uint64_t addr) { return readValue<uint64_t>(addr); }

  size_t syscallCount() const { return syscalls_; }

 private:
  static constexpr size_t kPageSize = 4096;
  using Page = std::array<unsigned char, kPageSize>;
  const Page* page(uint64_t page_addr);

  pid_t pid_;
  size_t syscalls_ = 0;
  std::unordered_map<uint64_t, std::optional<Page>> pages_;
};

}  // namespace hangwatch::forensics
