// Loads a pass-through shim the way ctypes, Python extension modules and plugin
// loaders do (dlopen, RTLD_LOCAL or RTLD_GLOBAL) and runs its transcript.
//   passthrough_driver SHIM.so local|global
// stdout: the shim's transcript. stderr: what the watchdog, if preloaded, timed.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[2], "local") != 0 && std::strcmp(argv[2], "global") != 0)) {
    std::fprintf(stderr, "usage: %s SHIM.so local|global\n", argv[0]);
    return 2;
  }
  const int mode = std::strcmp(argv[2], "local") == 0 ? RTLD_LOCAL : RTLD_GLOBAL;
  void* shim = dlopen(argv[1], RTLD_NOW | mode);
  if (shim == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  auto run = reinterpret_cast<int (*)(FILE*)>(dlsym(shim, "passthrough_run"));
  if (run == nullptr) {
    std::fprintf(stderr, "no passthrough_run in %s\n", argv[1]);
    return 2;
  }
  const int rc = run(stdout);
  std::fflush(stdout);
  // The poller counts completions asynchronously: give it a moment before reporting.
  if (auto completed = reinterpret_cast<unsigned long long (*)()>(dlsym(RTLD_DEFAULT, "hangwatch_ops_completed"))) {
    unsigned long long n = 0;
    for (int i = 0; i < 100 && (n = completed()) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::fprintf(stderr, "hangwatch_ops_completed=%llu\n", n);
  }
  return rc;
}
