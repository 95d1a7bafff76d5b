#include "link_profiler.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string_view>

#include "link_meter.h"

namespace hangwatch::watchdog {
namespace {

namespace np = nccl_profiler;

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
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

enum class HandleKind : uint8_t { kSendOp, kSendStep };

// NCCL keeps at most NCCL_STEPS (8) steps of a connection in flight and indexes its own
// step handles by step % NCCL_STEPS: a step's record lives in its operation's slot, so
// the proxy thread allocates once per operation, never per step.
constexpr int kStepSlots = 8;

struct SendOp;

struct SendStep {
  HandleKind kind = HandleKind::kSendStep;
  const SendOp* op = nullptr;
  int64_t wire_start_ns = 0;  // 0 until the step is handed to the network
  uint64_t bytes = 0;
};

struct SendOp {
  HandleKind kind = HandleKind::kSendOp;
  LinkKey key;
  SendStep steps[kStepSlots];
};

ncclResult_t init(void** context, uint64_t comm_id, int* activation_mask, const char*, int, int nranks, int rank,
                  np::DebugLogger) {
  ownPid();
  *activation_mask = 0;
  *context = nullptr;
  if (const char* v = std::getenv("HANGWATCH_DISABLE"); v && std::string_view(v) == "1") return ncclSuccess;
  *context = new (std::nothrow) Context{comm_id, nranks, rank};
  if (*context != nullptr) *activation_mask = static_cast<int>(np::kProxyOp | np::kProxyStep);
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** handle, np::EventDescr* descr) {
  *handle = nullptr;
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr || descr == nullptr) return ncclSuccess;
  if (descr->type == np::kProxyOp) {
    // Under PXN this proxy thread runs another local rank's operations with that process's
    // context pointer: never dereference it (NCCL's ext-profiler README, "PXN"). That
    // rank's own watchdog does not see these steps; they are left out.
    if (descr->proxyOp.pid != ownPid()) return ncclSuccess;
    // Receives are left alone: their wait includes the sender's upstream, not just the wire.
    if (descr->proxyOp.isSend) {
      auto* op = new (std::nothrow) SendOp;
      if (op != nullptr) op->key = {ctx->comm_id, ctx->nranks, ctx->rank, descr->proxyOp.peer};
      *handle = op;
    }
  } else if (descr->type == np::kProxyStep) {
    auto* op = static_cast<SendOp*>(descr->parentObj);
    if (op != nullptr && op->kind == HandleKind::kSendOp) {
      SendStep& step = op->steps[static_cast<unsigned>(descr->proxyStep.step) % kStepSlots];
      step = SendStep{HandleKind::kSendStep, op};
      *handle = &step;
    }
  }
  return ncclSuccess;
}

ncclResult_t recordEventState(void* handle, np::EventState state, np::EventStateArgs* args) {
  auto* step = static_cast<SendStep*>(handle);
  if (step == nullptr || step->kind != HandleKind::kSendStep) return ncclSuccess;
  if (state == np::kProxyStepSendWait) {
    step->wire_start_ns = monotonicNs();
    if (args != nullptr) step->bytes = args->proxyStep.transSize;
  }
  return ncclSuccess;
}

ncclResult_t stopEvent(void* handle) {
  if (handle == nullptr) return ncclSuccess;
  if (*static_cast<HandleKind*>(handle) == HandleKind::kSendOp) {
    delete static_cast<SendOp*>(handle);
    return ncclSuccess;
  }
  auto* step = static_cast<SendStep*>(handle);
  if (step->wire_start_ns != 0) linkMeter().add(step->op->key, step->bytes, step->wire_start_ns, monotonicNs());
  step->wire_start_ns = 0;  // the slot is free for step + kStepSlots
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
