#include "hangwatch/forensics/python/python_thread_names.h"

namespace hangwatch::forensics {

std::unordered_map<uint64_t, std::string> readPythonThreadNames(PythonObjectReader& objects, const PythonLayout& layout,
                                                                uint64_t interp) {
  std::unordered_map<uint64_t, std::string> names;
  auto modules = objects.memory().readPointer(interp + layout.interp_modules);
  if (!modules) return names;
  auto threading = objects.dictGet(*modules, "threading");
  if (!threading || !objects.hasTypeNamed(*threading, "module")) return names;
  auto module_dict = objects.memory().readPointer(*threading + layout.module_dict);
  if (!module_dict) return names;
  auto active = objects.dictGet(*module_dict, "_active");
  if (!active) return names;
  for (const auto& [ident_obj, thread] : objects.dictItems(*active)) {
    auto ident = objects.unsignedLong(ident_obj);
    auto name_obj = objects.attribute(thread, "_name");
    if (!ident || !name_obj) continue;
    if (auto name = objects.unicode(*name_obj)) names.emplace(*ident, *name);
  }
  return names;
}

}  // namespace hangwatch::forensics
