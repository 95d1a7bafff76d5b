#include "hangwatch/simgpu/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace simgpu {
namespace {

template <typename T>
void readEnv(const char* name, T& out, T min_value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (errno != 0 || *end != '\0' || !(v >= static_cast<double>(min_value))) {
    std::fprintf(stderr, "simgpu: ignoring %s='%s': expected a number >= %g\n", name, text,
                 static_cast<double>(min_value));
    return;
  }
  out = static_cast<T>(v);
}

SimConfig load() {
  SimConfig c;
  readEnv("SIMGPU_DEVICE_COUNT", c.device_count, 1);
  readEnv("SIMGPU_TFLOPS", c.tflops, 1e-6);
  readEnv("SIMGPU_COPY_GBPS", c.copy_gbps, 1e-6);
  readEnv("SIMGPU_LINK_GBPS", c.link_gbps, 1e-6);
  readEnv("SIMGPU_NCHANNELS", c.nchannels, 1);
  readEnv("SIMGPU_SLOT_BYTES", c.slot_bytes, size_t{256});
  readEnv("SIMGPU_LAUNCH_QUEUE_DEPTH", c.launch_queue_depth, size_t{0});
  readEnv("SIMGPU_GEMM_COMPUTE_LIMIT", c.gemm_compute_limit, uint64_t{0});
  if (c.nchannels > 32) c.nchannels = 32;
  return c;
}

}  // namespace

int64_t ncclParam(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 0) : fallback;
}

const SimConfig& simConfig() {
  static const SimConfig config = load();
  return config;
}

}  // namespace simgpu
