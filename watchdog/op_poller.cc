#include "hangwatch/watchdog/op_poller.h"

#include <vector>

namespace hangwatch::watchdog {

OpPoller::OpPoller(EventApi& api, DeviceTimers& timers, CommTable& comms, CompletionSink sink, KernelNamer namer)
    : api_(api), timers_(timers), comms_(comms), sink_(std::move(sink)), namer_(std::move(namer)) {}

size_t OpPoller::poll(int64_t now_ns) {
  size_t done = 0;
  std::vector<uint64_t> streams;
  streams.reserve(queues_.streams().size());
  for (const auto& [stream, q] : queues_.streams()) streams.push_back(stream);
  for (uint64_t stream : streams) {
    while (PendingOp* op = queues_.front(stream)) {
      if (!op->gpu_started && api_.query(op->start_event) == cudaSuccess) op->gpu_started = true;
      if (!op->gpu_started || api_.query(op->end_event) != cudaSuccess) break;
      complete(*op, now_ns);
      int64_t finished = op->op.gpu_end_ns > 0 ? op->op.gpu_end_ns : now_ns;
      queues_.popFront(stream, finished);
      ++done;
    }
  }
  return done;
}

void OpPoller::complete(PendingOp& op, int64_t now_ns) {
  CompletedOp& c = op.op;
  float ms = 0;
  DeviceTimer* timer = timers_.find(op.device);
  auto start = timer ? timer->clock().hostNs(op.start_event) : std::nullopt;
  if (start) {
    c.gpu_start_ns = *start;
    c.gpu_end_ns = api_.elapsedMs(&ms, op.start_event, op.end_event) == cudaSuccess
                       ? *start + static_cast<int64_t>(static_cast<double>(ms) * 1e6)
                       : now_ns;
  } else if (api_.elapsedMs(&ms, op.start_event, op.end_event) == cudaSuccess) {
    // No reference yet: the duration is still exact, the placement is approximate.
    c.gpu_end_ns = now_ns;
    c.gpu_start_ns = now_ns - static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  } else {
    c.gpu_start_ns = c.gpu_end_ns = now_ns;
  }
  if (op.kernel_func && namer_) {
    if (const char* name = namer_(op)) c.name = name;
  }
  if (c.cls == OpClass::kCollective && op.comm) {
    if (CommEntry* e = comms_.find(op.comm)) {
      uint64_t seen = e->completed_plus1.load(std::memory_order_relaxed);
      if (c.seq + 1 > seen) e->completed_plus1.store(c.seq + 1, std::memory_order_release);
    }
  }
  if (timer) {
    timer->pool().release(op.start_event);
    timer->pool().release(op.end_event);
  }
  ++completed_;
  if (sink_) sink_(c);
}

}  // namespace hangwatch::watchdog
