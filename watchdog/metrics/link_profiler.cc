#include "hangwatch/watchdog/metrics/link_profiler.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string_view>

#include "hangwatch/watchdog/metrics/link_meter.h"
#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"
#include "hangwatch/watchdog/metrics/proxy_progress.h"

namespace hangwatch::watchdog {
namespace {

namespace np = nccl_profiler;

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The same clock read a few ns cheaper, ticking every few ms (the kernel's jiffy): enough for
// "was this collective launched before or after that one was issued" with the verdict's 50 ms
// slack, on the user's launching thread once per collective.
int64_t coarseMonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Context {
  uint64_t comm_id;
  int nranks;
  int rank;
};

// This process's pid, kept current across fork (getpid() is a system call per event otherwise).
pid_t ownPid() {
  static pid_t pid = [] {
    pthread_atfork(nullptr, nullptr, [] { pid = ::getpid(); });
    return ::getpid();
  }();
  return pid;
}

// Stage of a step that a proxy-step state means (proxy_progress.h), or -1.
int stageOf(np::EventState state, bool send) {
  if (send) {
    switch (state) {
      case np::kProxyStepSendGPUWait: return 0;
      case np::kProxyStepSendPeerWait: return 1;
      case np::kProxyStepSendWait: return 2;
      default: return -1;
    }
  }
  switch (state) {
    case np::kProxyStepRecvWait: return 0;
    case np::kProxyStepRecvFlushWait: return 1;
    case np::kProxyStepRecvGPUWait: return 2;
    default: return -1;
  }
}

// Counts every stage the step passed up to `stage` (a state NCCL did not record for
// this step still happened: the step could not get further without it).
void advanceTo(ProxyOpRecord::Step& step, int stage, int64_t now_ns) {
  ProxyConnection* c = step.op->connection;
  while (step.stage < stage) c->advance(++step.stage, now_ns);
}

ncclResult_t init(void** context, uint64_t comm_id, int* activation_mask, const char*, int, int nranks, int rank,
                  np::DebugLogger) {
  ownPid();
  *activation_mask = 0;
  *context = nullptr;
  if (const char* v = std::getenv("HANGWATCH_DISABLE"); v && std::string_view(v) == "1") return ncclSuccess;
  ncclCommIds().initSeen(comm_id, nranks, rank);
  proxyProgress();  // made here, not on NCCL's proxy thread
  *context = new (std::nothrow) Context{comm_id, nranks, rank};
  if (*context != nullptr) *activation_mask = static_cast<int>(np::kProxyOp | np::kProxyStep | np::kKernelCh);
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** handle, np::EventDescr* descr) {
  *handle = nullptr;
  if (context == nullptr || descr == nullptr) return ncclSuccess;
  if (descr->type == np::kProxyOp) {
    // Under PXN this proxy thread runs another local rank's operations with that process's
    // context pointer: never dereference it (NCCL's ext-profiler README, "PXN"). That
    // rank's own watchdog does not see these steps; they are left out.
    if (descr->proxyOp.pid != ownPid()) return ncclSuccess;
    auto* ctx = static_cast<Context*>(context);
    const bool send = descr->proxyOp.isSend != 0;
    ProxyConnection* c =
        proxyProgress().connection({ctx->comm_id, descr->proxyOp.channelId, descr->proxyOp.peer, send}, ctx->rank,
                                   ctx->nranks);
    if (c == nullptr) return ncclSuccess;
    c->opStarted(0);
    ProxyOpRecord* op = c->claimOp();
    if (op == nullptr) {
      c->opUntracked();
      return ncclSuccess;
    }
    *handle = op;
  } else if (descr->type == np::kProxyStep) {
    auto* op = static_cast<ProxyOpRecord*>(descr->parentObj);
    if (op == nullptr || op->kind != kOpHandle) return ncclSuccess;
    ProxyOpRecord::Step& step = op->steps[static_cast<unsigned>(descr->proxyStep.step) % kStepSlots];
    step = ProxyOpRecord::Step{kStepHandle, -1, op, 0, 0};
    *handle = &step;
  } else if (descr->type == np::kColl) {
    // NCCL sends Coll events as the parents of the task events asked for (emittingMask), at
    // launch, on the launching thread: which algorithm this collective runs. No handle: its
    // stop says nothing the steps do not.
    proxyProgress().collLaunched(static_cast<Context*>(context)->comm_id, descr->coll.algo, coarseMonotonicNs());
  } else if (descr->type == np::kKernelCh) {
    auto* ctx = static_cast<Context*>(context);
    KernelChannel* k = proxyProgress().kernelChannel(ctx->comm_id, descr->kernelCh.channelId);
    if (k == nullptr) return ncclSuccess;
    k->started.fetch_add(1, std::memory_order_relaxed);
    k->started_ns.store(monotonicNs(), std::memory_order_relaxed);
    *handle = k;
  }
  return ncclSuccess;
}

ncclResult_t recordEventState(void* handle, np::EventState state, np::EventStateArgs* args) {
  if (handle == nullptr || *static_cast<uint8_t*>(handle) != kStepHandle) return ncclSuccess;
  auto& step = *static_cast<ProxyOpRecord::Step*>(handle);
  const bool send = step.op->connection->key().send;
  const int stage = stageOf(state, send);
  if (stage < 0) return ncclSuccess;
  const int64_t now = monotonicNs();
  advanceTo(step, stage, now);
  if (send && state == np::kProxyStepSendWait) {
    step.wire_start_ns = now;
    if (args != nullptr) step.bytes = args->proxyStep.transSize;
  }
  return ncclSuccess;
}

ncclResult_t stopEvent(void* handle) {
  if (handle == nullptr) return ncclSuccess;
  switch (*static_cast<uint8_t*>(handle)) {
    case kOpHandle: {
      auto* op = static_cast<ProxyOpRecord*>(handle);
      op->connection->opDone(0);
      op->in_use.store(false, std::memory_order_release);
      break;
    }
    case kStepHandle: {
      auto& step = *static_cast<ProxyOpRecord::Step*>(handle);
      const int64_t now = monotonicNs();
      advanceTo(step, kProxyStages - 1, now);
      ProxyConnection* c = step.op->connection;
      if (step.wire_start_ns != 0) {
        const ProxyConnectionKey key = c->key();
        linkMeter().add({key.comm_id, c->nranks(), c->rank(), key.peer}, step.bytes, step.wire_start_ns, now);
      }
      step.wire_start_ns = 0;  // the slot is free for step + kStepSlots
      break;
    }
    case kKernelChHandle: {
      auto* k = static_cast<KernelChannel*>(handle);
      k->stopped.fetch_add(1, std::memory_order_relaxed);
      k->stopped_ns.store(monotonicNs(), std::memory_order_relaxed);
      break;
    }
    default:
      break;
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

const np::ProfilerV5 kProfiler = {"hangwatch", &init, &startEvent, &stopEvent, &recordEventState, &finalize};

}  // namespace

const nccl_profiler::ProfilerV5& linkProfiler() { return kProfiler; }

}  // namespace hangwatch::watchdog
