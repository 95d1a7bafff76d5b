#include "hangwatch/forensics/python/python_layout.h"

#include <cstring>

#include <fmt/format.h>

namespace hangwatch::forensics {
namespace {

PythonLayout layout310() {
  PythonLayout l;
  l.minor = 10;
  l.runtime_interpreters_head = 32;
  l.interp_next = 0;
  l.interp_threads_head = 8;
  l.interp_modules = 856;
  l.tstate_next = 8;
  l.tstate_thread_id = 176;
  l.tstate_frame = 24;
  l.frame_previous = 24;
  l.frame_code = 32;
  l.frame_instr = 96;
  l.code_filename = 104;
  l.code_name = 112;
  l.code_firstlineno = 40;
  l.code_linetable = 120;
  l.unicode_ascii_size = 48;
  l.unicode_compact_size = 72;
  l.heaptype_cached_keys = 872;
  return l;
}

PythonLayout layout311() {
  PythonLayout l;
  l.minor = 11;
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 16;
  l.interp_modules = 888;
  l.tstate_next = 8;
  l.tstate_thread_id = 152;
  l.tstate_native_thread_id = 160;
  l.tstate_frame = 56;
  l.cframe_current_frame = 8;
  l.frame_previous = 48;
  l.frame_code = 32;
  l.frame_instr = 56;
  l.frame_owner = 69;
  l.frame_is_entry = 68;
  l.code_code_adaptive = 184;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_firstlineno = 72;
  l.code_linetable = 136;
  l.unicode_ascii_size = 48;
  l.unicode_compact_size = 72;
  l.heaptype_cached_keys = 872;
  return l;
}

PythonLayout layout312() {
  PythonLayout l;
  l.minor = 12;
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 72;
  l.interp_modules = 944;
  l.tstate_next = 8;
  l.tstate_thread_id = 136;
  l.tstate_native_thread_id = 144;
  l.tstate_frame = 56;
  l.cframe_current_frame = 0;
  l.frame_previous = 8;
  l.frame_code = 0;
  l.frame_instr = 56;
  l.frame_owner = 70;
  l.code_code_adaptive = 192;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_firstlineno = 68;
  l.code_linetable = 136;
  l.unicode_ascii_size = 40;
  l.unicode_compact_size = 56;
  l.heaptype_cached_keys = 880;
  return l;
}

uint64_t u64At(const std::vector<unsigned char>& block, size_t pos) {
  uint64_t v = 0;
  std::memcpy(&v, block.data() + pos, sizeof(v));
  return v;
}

}  // namespace

std::optional<PythonLayout> pythonLayoutForMinor(int minor) {
  switch (minor) {
    case 10: return layout310();
    case 11: return layout311();
    case 12: return layout312();
    default: return std::nullopt;
  }
}

Expected<PythonLayout> pythonLayoutFromDebugOffsets(const std::vector<unsigned char>& block, int minor) {
  if (minor != 13) return Error{fmt::format("no known _Py_DebugOffsets layout for Python 3.{}", minor)};
  if (block.size() < kDebugOffsetsReadSize) return Error{"_Py_DebugOffsets block too short"};
  if (std::memcmp(block.data(), "xdebugpy", 8) != 0) return Error{"_PyRuntime does not start with the xdebugpy cookie"};
  const uint64_t hex = u64At(block, 8);
  if (((hex >> 24) & 0xff) != 3 || static_cast<int>((hex >> 16) & 0xff) != minor)
    return Error{"_Py_DebugOffsets version does not match the library name"};
  if (u64At(block, 16) != 0) return Error{"free-threaded CPython builds are not supported"};
  // Field positions follow the 3.13 struct declaration: runtime, interpreter,
  // thread, frame, code, object, type, tuple, list, dict, float, long, bytes, unicode.
  PythonLayout l;
  l.minor = minor;
  l.runtime_interpreters_head = u64At(block, 40);
  l.interp_next = u64At(block, 64);
  l.interp_threads_head = u64At(block, 72);
  l.interp_modules = u64At(block, 88);
  l.tstate_next = u64At(block, 168);
  l.tstate_frame = u64At(block, 184);
  l.tstate_thread_id = u64At(block, 192);
  l.tstate_native_thread_id = u64At(block, 200);
  l.frame_previous = u64At(block, 232);
  l.frame_code = u64At(block, 240);
  l.frame_instr = u64At(block, 248);
  l.frame_owner = u64At(block, 264);
  l.code_filename = u64At(block, 280);
  l.code_name = u64At(block, 288);
  l.code_linetable = u64At(block, 304);
  l.code_firstlineno = u64At(block, 312);
  l.code_code_adaptive = u64At(block, 344);
  l.object_type = u64At(block, 360);
  l.type_name = u64At(block, 376);
  l.type_flags = u64At(block, 392);
  // Not in _Py_DebugOffsets; 3.13's PyTypeObject/PyHeapTypeObject (pystacks_layout_test checks them).
  l.heaptype_cached_keys = 880;
  l.dict_keys = u64At(block, 456);
  l.dict_values = u64At(block, 464);
  l.bytes_size = u64At(block, 520);
  l.bytes_sval = u64At(block, 528);
  l.unicode_state = u64At(block, 544);
  l.unicode_length = u64At(block, 552);
  l.unicode_ascii_size = u64At(block, 560);
  // PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject.
  l.unicode_compact_size = l.unicode_ascii_size + 16;
  const uint64_t interp_size = u64At(block, 48), tstate_size = u64At(block, 152), code_size = u64At(block, 272);
  const bool sane = interp_size > 0 && interp_size < (1u << 20) && l.interp_threads_head < interp_size &&
                    l.interp_modules < interp_size && tstate_size > 0 && tstate_size < (1u << 16) &&
                    l.tstate_frame < tstate_size && *l.tstate_native_thread_id < tstate_size &&
                    code_size > 0 && code_size < 4096 && *l.code_code_adaptive <= code_size;
  if (!sane) return Error{"_Py_DebugOffsets holds implausible offsets"};
  return l;
}

std::map<std::string, uint64_t> layoutFields(const PythonLayout& l) {
  std::map<std::string, uint64_t> f{
      {"runtime_interpreters_head", l.runtime_interpreters_head},
      {"interp_next", l.interp_next},
      {"interp_threads_head", l.interp_threads_head},
      {"interp_modules", l.interp_modules},
      {"tstate_next", l.tstate_next},
      {"tstate_thread_id", l.tstate_thread_id},
      {"tstate_frame", l.tstate_frame},
      {"frame_previous", l.frame_previous},
      {"frame_code", l.frame_code},
      {"frame_instr", l.frame_instr},
      {"code_filename", l.code_filename},
      {"code_name", l.code_name},
      {"code_firstlineno", l.code_firstlineno},
      {"code_linetable", l.code_linetable},
      {"object_type", l.object_type},
      {"type_name", l.type_name},
      {"bytes_size", l.bytes_size},
      {"bytes_sval", l.bytes_sval},
      {"unicode_length", l.unicode_length},
      {"unicode_state", l.unicode_state},
      {"unicode_ascii_size", l.unicode_ascii_size},
      {"unicode_compact_size", l.unicode_compact_size},
      {"dict_keys", l.dict_keys},
      {"dict_values", l.dict_values},
      {"type_basicsize", l.type_basicsize},
      {"type_dictoffset", l.type_dictoffset},
      {"type_flags", l.type_flags},
      {"heaptype_cached_keys", l.heaptype_cached_keys},
      {"module_dict", l.module_dict},
      {"long_digits", l.long_digits},
  };
  auto add = [&](const char* name, const std::optional<uint64_t>& v) {
    if (v) f.emplace(name, *v);
  };
  add("tstate_native_thread_id", l.tstate_native_thread_id);
  add("cframe_current_frame", l.cframe_current_frame);
  add("frame_owner", l.frame_owner);
  add("frame_is_entry", l.frame_is_entry);
  add("code_code_adaptive", l.code_code_adaptive);
  return f;
}

}  // namespace hangwatch::forensics
