#include "hangwatch/watchdog/object_by_address.h"

#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace hangwatch::watchdog {
namespace {

struct Search {
  uintptr_t address;
  uintptr_t page_mask;
  dl_find_object* result;
  bool found = false;
};

// Mapping bounds as glibc keeps them per object: from the first PT_LOAD's page to the end
// of the last one's page.
int visit(dl_phdr_info* info, size_t, void* data) {
  Search& s = *static_cast<Search*>(data);
  uintptr_t start = UINTPTR_MAX, end = 0, eh_frame = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t at = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && ph.p_memsz > 0) {
      if ((at & ~s.page_mask) < start) start = at & ~s.page_mask;
      if (((at + ph.p_memsz + s.page_mask) & ~s.page_mask) > end) end = (at + ph.p_memsz + s.page_mask) & ~s.page_mask;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = at;
    }
  }
  if (s.address < start || s.address >= end) return 0;
  std::memset(s.result, 0, sizeof *s.result);
  s.result->dlfo_map_start = reinterpret_cast<void*>(start);
  s.result->dlfo_map_end = reinterpret_cast<void*>(end);
  s.result->dlfo_eh_frame = reinterpret_cast<void*>(eh_frame);
  s.found = true;
  return 1;
}

}  // namespace

int findObjectByAddress(const void* address, dl_find_object* result) {
  Search s{reinterpret_cast<uintptr_t>(address), static_cast<uintptr_t>(::getpagesize()) - 1, result};
  ::dl_iterate_phdr(visit, &s);
  if (!s.found) return -1;
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) != 0) result->dlfo_link_map = map;
  return 0;
}

}  // namespace hangwatch::watchdog
