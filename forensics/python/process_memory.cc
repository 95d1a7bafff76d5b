#include "hangwatch/forensics/python/process_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace hangwatch::forensics {

const ProcessMemory::Page* ProcessMemory::page(uint64_t page_addr) {
  auto it = pages_.find(page_addr);
  if (it == pages_.end()) {
    Page data;
    iovec local{data.data(), kPageSize};
    iovec remote{reinterpret_cast<void*>(page_addr), kPageSize};
    ++syscalls_;
    const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    std::optional<Page> stored;
    if (n == static_cast<ssize_t>(kPageSize)) stored = data;
    it = pages_.emplace(page_addr, std::move(stored)).first;
  }
  return it->second ? &*it->second : nullptr;
}

bool ProcessMemory::read(uint64_t addr, void* out, size_t len) {
  auto* dst = static_cast<unsigned char*>(out);
  // Pointers from a target that is mid-update can be anything; refuse wrap-around.
  if (addr + len < addr) return false;
  while (len > 0) {
    const uint64_t base = addr & ~static_cast<uint64_t>(kPageSize - 1);
    const size_t in_page = static_cast<size_t>(addr - base);
    const size_t chunk = std::min(len, kPageSize - in_page);
    const Page* p = page(base);
    if (p == nullptr) return false;
    std::memcpy(dst, p->data() + in_page, chunk);
    dst += chunk;
    addr += chunk;
    len -= chunk;
  }
  return true;
}

}  // namespace hangwatch::forensics
