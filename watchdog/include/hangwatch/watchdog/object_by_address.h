#pragma once
// glibc 2.35's _dl_find_object on what glibc 2.28 has (dl_iterate_phdr, dladdr1): the
// static libgcc inside libhangwatch.so finds unwind tables through it (glibc_compat.cc).
#include <dlfcn.h>

namespace hangwatch::watchdog {

// The loaded object whose mapping holds `address`: 0 and `result` filled (its mapping, link
// map and PT_GNU_EH_FRAME segment), or -1 when no object holds it, as _dl_find_object.
int findObjectByAddress(const void* address, dl_find_object* result);

}  // namespace hangwatch::watchdog
