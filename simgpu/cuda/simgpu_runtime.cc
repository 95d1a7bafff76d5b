// simgpu/runtime.h: what the other sim libraries build on.
#include "hangwatch/simgpu/runtime.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/simgpu/cuda/device_clock.h"
#include "hangwatch/simgpu/cuda/runtime.h"
#include "hangwatch/simgpu/faults.h"

namespace simgpu {
namespace {

// Copied out of processFaults() once and never freed: stream workers may ask for
// the device speed while static destructors run at exit.
const FaultPlan& faultPlan() {
  static const FaultPlan* plan = [] {
    const hangwatch::Expected<FaultPlan>& parsed = processFaults();
    if (!parsed) {
      std::fprintf(stderr, "simgpu: %s; running at normal speed\n", parsed.error().c_str());
      return new FaultPlan();
    }
    return new FaultPlan(parsed.value());
  }();
  return *plan;
}

std::optional<int> launcherRank() {
  static const std::optional<int> rank = hangwatch::detectRankIdentity().rank;
  return rank;
}

}  // namespace

cudaError_t enqueue(cudaStream_t stream, const char* name, DeviceWork work) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  return rt.submit(*s, StreamTask{name != nullptr ? name : "simgpu_work", std::move(work), {}});
}

int currentDevice() { return Runtime::threadDevice(); }

bool primaryContextActive(int device) { return Runtime::current().contextActive(device); }

int processRank() { return launcherRank().value_or(currentDevice()); }

double deviceSpeed() {
  const double speed = faultPlan().rankSpeed(processRank());
  if (speed < 1.0) {
    static std::once_flag told;
    std::call_once(told, [] {
      for (const SlowRankFault& f : faultPlan().slow_ranks)
        if (f.rank == processRank()) FaultLedger::instance().fired(f.token);
    });
  }
  return speed;
}

const char* runningKernelName() { return Runtime::runningKernel(); }

void occupyDevice(std::chrono::nanoseconds modeled) { device_clock::occupy(modeled, deviceSpeed()); }

void occupyDeviceSince(std::chrono::steady_clock::time_point start) {
  device_clock::occupyElapsed(std::chrono::steady_clock::now() - start, deviceSpeed());
}

}  // namespace simgpu
