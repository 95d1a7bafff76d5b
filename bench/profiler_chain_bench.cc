// Cost of the profiler chain per NCCL callback (watchdog/metrics/profiler_chain.h): the
// same proxy-step sequence NCCL's net transport makes per network transfer (start,
// SendGPUWait, SendPeerWait, SendWait, stop) and the per-call events of a collective,
// once with no job plugin (the callbacks go straight to hangwatch's link profiler) and
// once with a job plugin behind it that does nothing (so what is measured is the chain).
// Report the ratio of the two from one run: bench/profiler_chain_bench --benchmark_repetitions=5.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include "hangwatch/common/nccl_profiler_v5.h"
#include "hangwatch/watchdog/metrics/link_profiler.h"
#include "hangwatch/watchdog/metrics/profiler_chain.h"

namespace np = hangwatch::nccl_profiler;
using hangwatch::watchdog::JobPlugin;
using hangwatch::watchdog::ProfilerChain;

namespace {

int g_handle;
int g_context;

// A job plugin that asks for proxy steps and does nothing with them.
const np::ProfilerV5 kNopJob = {
    "nop",
    [](void** c, uint64_t, int* mask, const char*, int, int, int, np::DebugLogger) {
      *mask = static_cast<int>(np::kProxyStep | np::kColl);
      *c = &g_context;
      return ncclSuccess;
    },
    [](void*, void** h, np::EventDescr*) {
      *h = &g_handle;
      return ncclSuccess;
    },
    [](void*) { return ncclSuccess; },
    [](void*, np::EventState, np::EventStateArgs*) { return ncclSuccess; },
    [](void*) { return ncclSuccess; }};

JobPlugin withJob() { return {&kNopJob, nullptr}; }
JobPlugin withoutJob() { return {}; }

// Per iteration one proxy step: five callbacks.
void proxySteps(benchmark::State& state, JobPlugin (*job)()) {
  ProfilerChain chain(hangwatch::watchdog::linkProfiler(), job);
  void* ctx = nullptr;
  int mask = 0;
  chain.init(&ctx, 0xbe, &mask, "", 2, 2, 0, nullptr);
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.peer = 1;
  op.proxyOp.isSend = 1;
  void* op_h = nullptr;
  chain.startEvent(ctx, &op_h, &op);
  np::EventDescr step{};
  step.type = np::kProxyStep;
  step.parentObj = op_h;
  np::EventStateArgs args{};
  args.proxyStep.transSize = 65536;
  for (auto _ : state) {
    void* h = nullptr;
    chain.startEvent(ctx, &h, &step);
    chain.recordEventState(h, np::kProxyStepSendGPUWait, &args);
    chain.recordEventState(h, np::kProxyStepSendPeerWait, &args);
    chain.recordEventState(h, np::kProxyStepSendWait, &args);
    chain.stopEvent(h);
    ++step.proxyStep.step;
  }
  chain.stopEvent(op_h);
  chain.finalize(ctx);
  state.SetItemsProcessed(state.iterations() * 5);
}

// Per iteration one collective call's events: GroupApi, CollApi, Group, Coll, with their stops.
void collectiveCalls(benchmark::State& state, JobPlugin (*job)()) {
  ProfilerChain chain(hangwatch::watchdog::linkProfiler(), job);
  void* ctx = nullptr;
  int mask = 0;
  chain.init(&ctx, 0xbf, &mask, "", 2, 2, 0, nullptr);
  for (auto _ : state) {
    void* group_api = nullptr;
    void* coll_api = nullptr;
    void* group = nullptr;
    void* coll = nullptr;
    np::EventDescr d{};
    d.type = np::kGroupApi;
    chain.startEvent(ctx, &group_api, &d);
    d.type = np::kCollApi;
    d.parentObj = group_api;
    chain.startEvent(ctx, &coll_api, &d);
    chain.stopEvent(coll_api);
    d.type = np::kGroup;
    d.parentObj = nullptr;
    chain.startEvent(ctx, &group, &d);
    d.type = np::kColl;
    d.parentObj = coll_api;
    chain.startEvent(ctx, &coll, &d);
    chain.stopEvent(coll);
    chain.stopEvent(group);
    chain.stopEvent(group_api);
  }
  chain.finalize(ctx);
  state.SetItemsProcessed(state.iterations() * 8);
}

void BM_ProxyStep_NoJobPlugin(benchmark::State& s) { proxySteps(s, &withoutJob); }
void BM_ProxyStep_WithJobPlugin(benchmark::State& s) { proxySteps(s, &withJob); }
void BM_CollectiveCall_NoJobPlugin(benchmark::State& s) { collectiveCalls(s, &withoutJob); }
void BM_CollectiveCall_WithJobPlugin(benchmark::State& s) { collectiveCalls(s, &withJob); }

BENCHMARK(BM_ProxyStep_NoJobPlugin);
BENCHMARK(BM_ProxyStep_WithJobPlugin);
BENCHMARK(BM_CollectiveCall_NoJobPlugin);
BENCHMARK(BM_CollectiveCall_WithJobPlugin);

}  // namespace

BENCHMARK_MAIN();
