#include "hangwatch/simgpu/nccl/comm_init_log.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "hangwatch/simgpu/nccl/debug_log.h"
#include "hangwatch/simgpu/nccl/net_devices.h"

namespace simnccl {
namespace {

// comm->busId: the device's PCI bus id read as hex digits, ':' and '.' skipped
// (src/misc/utils.cc:30 busIdToInt64), "0000:1B:00.0" -> 0x1b000.
long busIdOf(int device) {
  char text[32] = {};
  if (cudaDeviceGetPCIBusId(text, sizeof(text), device) != cudaSuccess) return 0;
  char hex[17] = {};
  int n = 0;
  for (const char* c = text; *c != '\0' && n < 16; ++c) {
    if (*c == ':' || *c == '.') continue;
    const bool digit = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || (*c >= 'A' && *c <= 'F');
    if (!digit) break;
    hex[n++] = *c;
  }
  return std::strtol(hex, nullptr, 16);
}

}  // namespace

void logCommInit(const CommInitCaller& caller, const CommInitLine& line, bool complete) {
  if (!debugEnabled(kLogInfo, subsys::kInit)) return;
  const int nvml_dev = gpuOnNode(line.device);
  const long bus_id = busIdOf(line.device);
  const int src_line = caller.parent != nullptr ? (complete ? 1593 : 1561) : (complete ? 1598 : 1574);
  if (caller.parent != nullptr)
    debugLogOnDevice(line.device, kLogInfo, subsys::kInit, "ncclCommInitRankFunc", src_line,
                     "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p splitCount %d color %d "
                     "key %d%s",
                     caller.func, static_cast<const void*>(line.comm), line.rank, line.nranks, line.device, nvml_dev,
                     bus_id, static_cast<const void*>(caller.parent), caller.split_count, caller.color, caller.key,
                     complete ? " - Init COMPLETE" : "- Init START");
  else
    debugLogOnDevice(line.device, kLogInfo, subsys::kInit, "ncclCommInitRankFunc", src_line,
                     "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init %s",
                     caller.func, static_cast<const void*>(line.comm), line.rank, line.nranks, line.device, nvml_dev,
                     bus_id, static_cast<unsigned long long>(line.comm_id), complete ? "COMPLETE" : "START");
}

}  // namespace simnccl
