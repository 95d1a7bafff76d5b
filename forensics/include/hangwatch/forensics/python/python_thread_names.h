#pragma once
// Python-level thread names (threading.Thread.name) of a stopped interpreter.
#include <cstdint>
#include <string>
#include <unordered_map>

#include "hangwatch/forensics/python/python_layout.h"
#include "hangwatch/forensics/python/python_object_reader.h"

namespace hangwatch::forensics {

// threading._active (ident -> Thread) of the interpreter at `interp`, as
// PyThreadState.thread_id -> Thread._name. Empty when threading was never imported.
std::unordered_map<uint64_t, std::string> readPythonThreadNames(PythonObjectReader& objects, const PythonLayout& layout,
                                                                uint64_t interp);

}  // namespace hangwatch::forensics
