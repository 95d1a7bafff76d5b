#pragma once
// Where the fields the stack reader follows sit inside one CPython minor
// version's structs. 3.10-3.12 come from tables checked against each version's
// headers (pystacks_layout_test); 3.13 publishes them itself in _Py_DebugOffsets.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

struct PythonLayout {
  int minor = 0;  // 3.<minor>
  uint64_t runtime_interpreters_head = 0;
  uint64_t interp_next = 0;
  uint64_t interp_threads_head = 0;
  uint64_t interp_modules = 0;
  uint64_t tstate_next = 0;
  uint64_t tstate_thread_id = 0;
  std::optional<uint64_t> tstate_native_thread_id;  // 3.11+
  uint64_t tstate_frame = 0;  // 3.10: frame, 3.11/3.12: cframe, 3.13: current_frame
  std::optional<uint64_t> cframe_current_frame;  // 3.11/3.12 only
  uint64_t frame_previous = 0;  // 3.10: PyFrameObject.f_back
  uint64_t frame_code = 0;
  uint64_t frame_instr = 0;  // 3.10: int f_lasti (code units); 3.11+: pointer into co_code_adaptive
  std::optional<uint64_t> frame_owner;     // 3.11+
  std::optional<uint64_t> frame_is_entry;  // 3.11 only
  std::optional<uint64_t> code_code_adaptive;   // 3.11+: instructions inline in the code object
  uint64_t code_filename = 0;
  uint64_t code_name = 0;
  uint64_t code_firstlineno = 0;
  uint64_t code_linetable = 0;
  uint64_t object_type = 8;
  uint64_t type_name = 24;
  uint64_t bytes_size = 16;
  uint64_t bytes_sval = 32;
  uint64_t unicode_length = 16;
  uint64_t unicode_state = 32;
  uint64_t unicode_ascii_size = 0;
  uint64_t unicode_compact_size = 0;
  uint64_t dict_keys = 32;
  uint64_t dict_values = 40;
  // Only for thread names (threading._active): objects, dicts and ints.
  uint64_t type_basicsize = 32;
  uint64_t type_dictoffset = 288;
  uint64_t type_flags = 168;
  uint64_t heaptype_cached_keys = 0;
  uint64_t module_dict = 16;
  uint64_t long_digits = 24;  // 3.10/3.11: ob_size holds the signed digit count; 3.12+: lv_tag
};

// 3.12+ push a shim frame owned by the C stack at each eval entry.
inline constexpr char kFrameOwnedByCStack = 3;

// The table for 3.10, 3.11 or 3.12; nullopt for other versions.
std::optional<PythonLayout> pythonLayoutForMinor(int minor);

// 3.13+: decodes the _Py_DebugOffsets block that starts _PyRuntime.
Expected<PythonLayout> pythonLayoutFromDebugOffsets(const std::vector<unsigned char>& block, int minor);
inline constexpr size_t kDebugOffsetsReadSize = 584;

// name -> offset, with the names the layout probe prints (for the layout test).
std::map<std::string, uint64_t> layoutFields(const PythonLayout& layout);

}  // namespace hangwatch::forensics
