#include "hangwatch/watchdog/symbol_lookup.h"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>

#include <string>
#include <vector>

namespace hangwatch::watchdog {
namespace {

const void* ownBase() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&findNextDefinition), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool definedOutsideUs(void* p) {
  Dl_info info{};
  return p != nullptr && dladdr(p, &info) != 0 && info.dli_fbase != ownBase();
}

// Paths of the loaded objects in load order. Collected first and opened afterwards:
// dl_iterate_phdr holds the loader's lock while it calls back.
std::vector<std::string> loadedObjectPaths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' &&
            reinterpret_cast<const void*>(info->dlpi_addr) != ownBase())
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

}  // namespace

void* findNextDefinition(const char* name) {
  if (void* p = dlsym(RTLD_NEXT, name)) return p;
  for (const std::string& path : loadedObjectPaths()) {
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* p = dlsym(handle, name);
    if (definedOutsideUs(p)) return p;  // the handle stays open: the object stays loaded
    dlclose(handle);
  }
  dlerror();  // leave no dlerror() text of ours behind for the program to read
  return nullptr;
}

unsigned long long loadedObjectGeneration() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
          *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the counter is the same in every entry: stop at the first
      },
      &adds);
  return adds;
}

}  // namespace hangwatch::watchdog
