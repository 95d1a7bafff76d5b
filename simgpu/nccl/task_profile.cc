#include "hangwatch/simgpu/nccl/task_profile.h"

#include <time.h>

namespace simnccl {
namespace {

namespace np = hangwatch::nccl_profiler;

// The GPU's %globaltimer, which KernelCh events carry: nanoseconds of wall-clock time.
uint64_t globalTimerNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

void TaskProfile::kernelStarted(int c) {
  Channel& ch = channel(c);
  for (const PeerOp& p : ch.ops)
    if (!p.send) p.op->kernelReached();
  if (!kernel_events_ || !ch.has_work) return;
  // As ncclProfilerStartKernelChEvent: the descriptor's rank is left unset.
  np::EventDescr d{};
  d.type = np::kKernelCh;
  d.parentObj = task_;
  d.kernelCh.channelId = static_cast<uint8_t>(c);
  d.kernelCh.pTimer = globalTimerNs();
  ch.kernel = hooks_.start(d);
}

void TaskProfile::kernelFinished(int c) {
  Channel& ch = channel(c);
  if (ch.kernel == nullptr) return;
  np::EventStateArgs args{};
  args.kernelCh.pTimer = globalTimerNs();
  hooks_.record(ch.kernel, np::kKernelChStop, &args);
  hooks_.stop(ch.kernel);
  ch.kernel = nullptr;
}

}  // namespace simnccl
