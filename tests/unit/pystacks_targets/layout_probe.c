/* Prints the CPython struct offsets that forensics/python reads, compiled
   against one interpreter's own headers; pystacks_layout_test compares them
   with the library's tables. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_dict.h"
#endif

#define P(name, value) printf("%s %zu\n", name, (size_t)(value))

int main(void) {
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#else
  P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
#if PY_VERSION_HEX >= 0x030C0000
  P("interp_modules", offsetof(PyInterpreterState, imports.modules));
#else
  P("interp_modules", offsetof(PyInterpreterState, modules));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("tstate_frame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030B0000
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
#else
  P("tstate_frame", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX >= 0x030D0000
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
#if PY_VERSION_HEX < 0x030C0000
  P("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
  P("code_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
  P("frame_previous", offsetof(PyFrameObject, f_back));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_instr", offsetof(PyFrameObject, f_lasti));
#endif
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
  P("object_type", offsetof(PyObject, ob_type));
  P("type_name", offsetof(PyTypeObject, tp_name));
  P("type_dictoffset", offsetof(PyTypeObject, tp_dictoffset));
  P("type_basicsize", offsetof(PyTypeObject, tp_basicsize));
  P("type_flags", offsetof(PyTypeObject, tp_flags));
  P("heaptype_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
  P("module_dict", sizeof(PyObject)); /* PyModuleObject is private: md_dict follows the header */
#if PY_VERSION_HEX >= 0x030C0000
  P("long_digits", offsetof(PyLongObject, long_value.ob_digit));
#else
  P("long_digits", offsetof(PyLongObject, ob_digit));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("dictkeys_nentries", offsetof(PyDictKeysObject, dk_nentries));
  P("dictkeys_indices", offsetof(PyDictKeysObject, dk_indices));
#endif
  P("bytes_size", offsetof(PyVarObject, ob_size));
  P("bytes_sval", offsetof(PyBytesObject, ob_sval));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("unicode_state", offsetof(PyASCIIObject, state));
  P("unicode_ascii_size", sizeof(PyASCIIObject));
  P("unicode_compact_size", sizeof(PyCompactUnicodeObject));
  P("dict_keys", offsetof(PyDictObject, ma_keys));
  P("dict_values", offsetof(PyDictObject, ma_values));
  return 0;
}
