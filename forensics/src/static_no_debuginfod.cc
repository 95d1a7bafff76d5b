// Only in the static `forensics` (HANGWATCH_PORTABLE): libdwfl without its debuginfod client,
// as elfutils built with --disable-libdebuginfod has it. That client dlopens
// libdebuginfod.so.1, which would bring the node's shared glibc into a program that carries
// its own; the collector reads local debug files only (remote_unwinder.cc) and never asks it.
// These definitions keep libdw.a's debuginfod-client.o out of the link: if an elfutils
// release names them differently, that member comes back and the link fails on its
// dlopen warning (-Wl,--fatal-warnings) or on a duplicate definition.
#include <elfutils/libdwfl.h>

#include <cstddef>

extern "C" {

int __libdwfl_debuginfod_find_executable(Dwfl*, const unsigned char*, size_t) { return -1; }

int __libdwfl_debuginfod_find_debuginfo(Dwfl*, const unsigned char*, size_t) { return -1; }

void __libdwfl_debuginfod_end(debuginfod_client*) {}

debuginfod_client* dwfl_get_debuginfod_client(Dwfl*) { return nullptr; }

}  // extern "C"
