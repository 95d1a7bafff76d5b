// hangwatch's profiler plugin in front of the job's own one (metrics/profiler_chain.h):
// the job's plugin must get exactly what NCCL 2.28 gives it when loaded alone. Each case
// drives the same NCCL-like calls (profiler_driver.h) once into the job's plugin directly
// and once through the chain, and compares what the plugin saw, written with its own
// handles and contexts numbered in order of appearance.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/nccl_profiler_plugin.h"
#include "hangwatch/watchdog/metrics/link_meter.h"
#include "hangwatch/watchdog/metrics/link_profiler.h"
#include "hangwatch/watchdog/metrics/profiler_chain.h"
#include "hangwatch/watchdog/metrics/proxy_progress.h"
#include "profiler_driver.h"

using namespace hangwatch::watchdog;
namespace np = hangwatch::nccl_profiler;

namespace {

// A job's plugin that writes down every call, with its handles and contexts as numbers.
// Its mask is set at init from `init_masks` (one per init; -1: left as found, as NCCL's
// example plugin does at every init but the first) and the pointer kept.
struct JobLog {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::deque<int> events;    // handles: &events[i]
  std::deque<int> contexts;  // contexts: &contexts[i]
  std::map<const void*, std::string> names;  // of each handle and context (thousands in one test)
  std::vector<int> init_masks;
  int* kept_mask = nullptr;

  std::string name(const void* p) {
    if (auto it = names.find(p); it != names.end()) return it->second;
    return p == nullptr ? "null" : "other";
  }
  int* add(std::deque<int>& to, const char* prefix) {
    to.push_back(0);
    names[&to.back()] = prefix + std::to_string(to.size() - 1);
    return &to.back();
  }
  void reset(std::vector<int> masks) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.clear();
    events.clear();
    contexts.clear();
    names.clear();
    init_masks = std::move(masks);
    kept_mask = nullptr;
  }
};

JobLog g_job;

ncclResult_t jobInit(void** context, uint64_t, int* mask, const char*, int, int, int rank, np::DebugLogger) {
  std::lock_guard<std::mutex> lock(g_job.mutex);
  const size_t n = g_job.contexts.size();
  g_job.lines.push_back("init " + std::to_string(n) + " rank=" + std::to_string(rank) +
                        " mask found=" + std::to_string(*mask));
  if (n < g_job.init_masks.size() && g_job.init_masks[n] >= 0) *mask = g_job.init_masks[n];
  g_job.kept_mask = mask;
  *context = g_job.add(g_job.contexts, "c");
  return ncclSuccess;
}

ncclResult_t jobStart(void* context, void** handle, np::EventDescr* d) {
  std::lock_guard<std::mutex> lock(g_job.mutex);
  g_job.lines.push_back("start type=" + std::to_string(d->type) + " ctx=" + g_job.name(context) +
                        " parent=" + g_job.name(d->parentObj));
  *handle = g_job.add(g_job.events, "h");
  return ncclSuccess;
}

ncclResult_t jobRecord(void* handle, np::EventState s, np::EventStateArgs*) {
  std::lock_guard<std::mutex> lock(g_job.mutex);
  g_job.lines.push_back("state " + g_job.name(handle) + " " + std::to_string(s));
  return ncclSuccess;
}

ncclResult_t jobStop(void* handle) {
  std::lock_guard<std::mutex> lock(g_job.mutex);
  g_job.lines.push_back("stop " + g_job.name(handle));
  return ncclSuccess;
}

ncclResult_t jobFinalize(void* context) {
  std::lock_guard<std::mutex> lock(g_job.mutex);
  g_job.lines.push_back("finalize " + g_job.name(context));
  return ncclSuccess;
}

const np::ProfilerV5 kJob = {"job", &jobInit, &jobStart, &jobStop, &jobRecord, &jobFinalize};

// The same plugin with NCCL 2.28's v4 entry point (no API events; a Coll's parent is the Group).
ncclResult_t jobInitV4(void** context, int* mask, const char* name, uint64_t comm_id, int nodes, int nranks, int rank,
                       np::DebugLogger log) {
  return jobInit(context, comm_id, mask, name, nodes, nranks, rank, log);
}
ncclResult_t jobStartV4(void* context, void** handle, np::EventDescrV4* d) {
  np::EventDescr v5{};
  v5.type = d->type;
  v5.parentObj = d->parentObj;
  return jobStart(context, handle, &v5);
}
const np::ProfilerV4 kJobV4 = {"job-v4", &jobInitV4, &jobStartV4, &jobStop, &jobRecord, &jobFinalize};

using Workload = std::function<void(const np::ProfilerV5& plugin, int& nccl_mask)>;

// What the job's plugin saw of `work`, loaded alone and then behind the chain.
std::pair<std::vector<std::string>, std::vector<std::string>> aloneAndChained(const np::ProfilerV5& job,
                                                                               std::vector<int> masks,
                                                                               const Workload& work) {
  g_job.reset(masks);
  int alone_mask = 0;
  work(job, alone_mask);
  std::vector<std::string> alone = g_job.lines;
  g_job.reset(masks);
  ProfilerChain chain(linkProfiler(), [&] { return JobPlugin{&job, nullptr}; });
  static ProfilerChain* current = nullptr;
  current = &chain;
  const np::ProfilerV5 through = {
      "chain",
      [](void** c, uint64_t id, int* m, const char* n, int nn, int nr, int r, np::DebugLogger l) {
        return current->init(c, id, m, n, nn, nr, r, l);
      },
      [](void* c, void** h, np::EventDescr* d) { return current->startEvent(c, h, d); },
      [](void* h) { return current->stopEvent(h); },
      [](void* h, np::EventState s, np::EventStateArgs* a) { return current->recordEventState(h, s, a); },
      [](void* c) { return current->finalize(c); }};
  int chained_mask = 0;
  work(through, chained_mask);
  CHECK(chain.pairedInUse() == 0);
  current = nullptr;
  return {alone, g_job.lines};
}

void oneCommunicator(const np::ProfilerV5& plugin, int& mask) {
  testing::NcclLikeComm comm(plugin, mask);
  comm.init(0xc0ffee, 0);
  for (int i = 0; i < 3; ++i) comm.allReduce(2, 5);
  comm.finalize();
}

}  // namespace

TEST_CASE("TheJobsPluginGetsTheEventsAndParentsNcclSendsForItsMaskAlone") {
  const std::vector<std::pair<const char*, int>> masks = {
      {"ProxyOp only: GroupApi, CollApi, Group and Coll come as its implied parents", np::kProxyOp},
      {"Coll", np::kColl},
      {"ProxyStep", np::kProxyStep},
      {"KernelCh: under Colls, no proxy events", np::kKernelCh},
      {"GroupApi", np::kGroupApi},
      {"KernelLaunch", np::kKernelLaunch},
      {"CollApi and ProxyStep", np::kCollApi | np::kProxyStep},
      {"everything", 0xfff},
      {"nothing", 0},
  };
  for (const auto& [what, mask] : masks) {
    INFO(what);
    auto [alone, chained] = aloneAndChained(kJob, {mask}, oneCommunicator);
    CHECK(chained == alone);
    CHECK(!alone.empty());
  }
}

TEST_CASE("ThePluginsParentsAreItsOwnHandles") {
  auto [alone, chained] = aloneAndChained(kJob, {np::kProxyOp}, oneCommunicator);
  // The first call: GroupApi h0, CollApi h1 under it, Group h2, Coll h3 under h1, ProxyOps under h3.
  REQUIRE(chained.size() > 8);
  CHECK(chained[1] == "start type=" + std::to_string(np::kGroupApi) + " ctx=c0 parent=null");
  CHECK(chained[3] == "start type=" + std::to_string(np::kCollApi) + " ctx=c0 parent=h0");
  CHECK(chained == alone);
}

TEST_CASE("AV4PluginGetsWhatNcclsV4AdaptorGivesIt") {
  const np::ProfilerV5* adapted = np::adaptV4(&kJobV4);
  for (int mask : {static_cast<int>(np::kProxyOp), static_cast<int>(np::kColl), static_cast<int>(np::kKernelCh)}) {
    INFO("mask " << mask);
    auto [alone, chained] = aloneAndChained(*adapted, {mask}, oneCommunicator);
    CHECK(chained == alone);
    // No GroupApi or CollApi events reach a v4 plugin; its Coll's parent is the Group.
    for (const std::string& line : alone) {
      CHECK(line.find("type=" + std::to_string(np::kGroupApi) + " ") == std::string::npos);
      CHECK(line.find("type=" + std::to_string(np::kCollApi) + " ") == std::string::npos);
    }
  }
}

TEST_CASE("EveryInitGetsTheJobsOwnMaskAsItLeftIt") {
  // NCCL's mask is one int per process: the example plugin sets it at its first init only.
  const Workload two_comms = [](const np::ProfilerV5& plugin, int& mask) {
    testing::NcclLikeComm world(plugin, mask), tp(plugin, mask);
    world.init(1, 0);
    tp.init(2, 0);
    world.allReduce(1, 3);
    tp.allReduce(1, 3);
    tp.finalize();
    world.finalize();
  };
  SECTION("set at the first init only") {
    auto [alone, chained] = aloneAndChained(kJob, {static_cast<int>(np::kColl), -1}, two_comms);
    CHECK(chained == alone);
    CHECK(alone[1] == "init 1 rank=0 mask found=" + std::to_string(np::kColl));
  }
  SECTION("changed at a later init: every communicator follows") {
    auto [alone, chained] =
        aloneAndChained(kJob, {static_cast<int>(np::kColl), static_cast<int>(np::kKernelCh | np::kProxyOp)}, two_comms);
    CHECK(chained == alone);
  }
}

TEST_CASE("TheMaskThePluginKeptStaysWritableAfterEveryCommunicatorIsGone") {
  g_job.reset({static_cast<int>(np::kColl)});
  ProfilerChain chain(linkProfiler(), [] { return JobPlugin{&kJob, nullptr}; });
  void* ctx = nullptr;
  int nccl_mask = 0;
  REQUIRE(chain.init(&ctx, 7, &nccl_mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  CHECK((nccl_mask & np::kColl) != 0);
  CHECK((nccl_mask & np::kProxyStep) != 0);  // hangwatch's own
  REQUIRE(chain.finalize(ctx) == ncclSuccess);
  // As the example's exampleProfilerStart() may do at any time (ASan: no use after free).
  REQUIRE(g_job.kept_mask != nullptr);
  __atomic_store_n(g_job.kept_mask, static_cast<int>(np::kKernelLaunch), __ATOMIC_RELAXED);
  REQUIRE(chain.init(&ctx, 8, &nccl_mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  CHECK(g_job.lines.back() == "init 1 rank=0 mask found=" + std::to_string(np::kKernelLaunch));
  CHECK((nccl_mask & np::kKernelLaunch) != 0);
  chain.finalize(ctx);
}

TEST_CASE("AStepStartedAgainWithoutAStopKeepsOneRecordAndTheJobSeesEveryStart") {
  const Workload held_back = [](const np::ProfilerV5& plugin, int& mask) {
    testing::NcclLikeComm comm(plugin, mask);
    comm.init(3, 0);
    comm.heldBackReceive(1000);
    comm.finalize();
  };
  auto [alone, chained] = aloneAndChained(kJob, {static_cast<int>(np::kProxyStep)}, held_back);
  CHECK(chained == alone);
  CHECK(alone.size() > 1000u);
}

namespace {

long residentKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

// A 60 s stall with a held-back receive: NCCL's proxy starts the step again on every
// pass (simnccl once a millisecond: 60,000 starts; NCCL's own proxy loops far faster).
// The chain keeps one record for the operation however many starts come.
TEST_CASE("MemoryAndHandlesStayBoundedUnderAMillionRestartedSteps") {
  g_job.reset({static_cast<int>(np::kProxyOp)});  // the job's plugin does not take steps: nothing grows there
  ProfilerChain chain(linkProfiler(), [] { return JobPlugin{&kJob, nullptr}; });
  int nccl_mask = 0;
  void* ctx = nullptr;
  REQUIRE(chain.init(&ctx, 9, &nccl_mask, "", 2, 2, 0, nullptr) == ncclSuccess);
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.peer = 1;
  void* op_h = nullptr;
  chain.startEvent(ctx, &op_h, &op);
  REQUIRE(op_h != nullptr);
  np::EventDescr step{};
  step.type = np::kProxyStep;
  step.parentObj = op_h;
  void* step_h = nullptr;
  const auto restart = [&](long n) {
    for (long i = 0; i < n; ++i) chain.startEvent(ctx, &step_h, &step);
  };
  restart(10'000);  // warm: every page the chain will ever touch for this is touched
  const long rss_before = residentKb();
  restart(1'000'000);
  const long rss_after = residentKb();
  CHECK(chain.pairedInUse() == 1);
  INFO("RSS " << rss_before << " kB -> " << rss_after << " kB");
  CHECK(rss_after - rss_before < 512);
  chain.recordEventState(step_h, np::kProxyStepRecvWait, nullptr);
  chain.stopEvent(step_h);
  chain.stopEvent(op_h);
  CHECK(chain.pairedInUse() == 0);
  chain.finalize(ctx);
}

TEST_CASE("PxnOperationsGiveTheJobItsParentAndNoContextAndHangwatchNothing") {
  const Workload pxn = [](const np::ProfilerV5& plugin, int& mask) {
    testing::NcclLikeComm comm(plugin, mask);
    comm.init(4, 0);
    comm.allReduce(1, 3, ::getpid() + 1);
    comm.finalize();
  };
  g_job.reset({static_cast<int>(np::kProxyStep)});
  linkMeter().drain();
  auto [alone, chained] = aloneAndChained(kJob, {static_cast<int>(np::kProxyStep)}, pxn);
  CHECK(linkMeter().drain().empty());  // hangwatch took none of the other process's steps
  // Alone, NCCL hands the plugin the other process's context; behind the chain it gets null.
  REQUIRE(alone.size() == chained.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    std::string expected = alone[i];
    if (expected.rfind("start type=" + std::to_string(np::kProxyOp), 0) == 0 ||
        expected.rfind("start type=" + std::to_string(np::kProxyStep), 0) == 0)
      expected.replace(expected.find("ctx=c0"), 6, "ctx=null");
    CHECK(chained[i] == expected);
  }
}

TEST_CASE("PastItsCapacityTheChainLeavesTheEventsToTheJobsPlugin") {
  g_job.reset({static_cast<int>(np::kProxyStep)});
  ProfilerChain chain(linkProfiler(), [] { return JobPlugin{&kJob, nullptr}; }, 1);
  int nccl_mask = 0;
  void* ctx = nullptr;
  chain.init(&ctx, 5, &nccl_mask, "", 2, 2, 0, nullptr);
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid();
  void* first = nullptr;
  void* second = nullptr;
  chain.startEvent(ctx, &first, &op);
  chain.startEvent(ctx, &second, &op);
  CHECK(chain.pairedInUse() == 1);
  CHECK(g_job.name(second) == "h1");  // the job's own handle, straight to NCCL
  np::EventDescr step{};
  step.type = np::kProxyStep;
  step.parentObj = second;
  void* step_h = nullptr;
  chain.startEvent(ctx, &step_h, &step);
  CHECK(g_job.lines.back() == "start type=" + std::to_string(np::kProxyStep) + " ctx=c0 parent=h1");
  chain.stopEvent(step_h);
  chain.stopEvent(second);
  chain.stopEvent(first);
  CHECK(g_job.lines.back() == "stop h0");
  chain.finalize(ctx);
}

TEST_CASE("ProxyThreadsOfSeveralCommunicatorsShareTheChain") {
  g_job.reset({static_cast<int>(np::kProxyStep | np::kKernelCh)});
  ProfilerChain chain(linkProfiler(), [] { return JobPlugin{&kJob, nullptr}; }, 64);
  static ProfilerChain* current = nullptr;
  current = &chain;
  const np::ProfilerV5 through = {
      "chain",
      [](void** c, uint64_t id, int* m, const char* n, int nn, int nr, int r, np::DebugLogger l) {
        return current->init(c, id, m, n, nn, nr, r, l);
      },
      [](void* c, void** h, np::EventDescr* d) { return current->startEvent(c, h, d); },
      [](void* h) { return current->stopEvent(h); },
      [](void* h, np::EventState s, np::EventStateArgs* a) { return current->recordEventState(h, s, a); },
      [](void* c) { return current->finalize(c); }};
  int nccl_mask = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        testing::NcclLikeComm comm(through, nccl_mask);
        comm.init(100 + static_cast<uint64_t>(t), t);
        comm.allReduce(4, 12);
        comm.heldBackReceive(50);
        comm.finalize();
      }
    });
  for (auto& th : threads) th.join();
  CHECK(chain.pairedInUse() == 0);
  current = nullptr;
}

TEST_CASE("WithoutAJobProfilerTheCallbacksAreHangwatchsOwn") {
  ProfilerChain chain(linkProfiler(), [] { return JobPlugin{}; });
  linkMeter().drain();
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(chain.init(&ctx, 0xdef, &mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  CHECK(mask == static_cast<int>(np::kProxyOp | np::kProxyStep | np::kKernelCh));
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.peer = 1;
  op.proxyOp.isSend = 1;
  void* op_h = nullptr;
  chain.startEvent(ctx, &op_h, &op);
  REQUIRE(op_h != nullptr);
  np::EventDescr step{};
  step.type = np::kProxyStep;
  step.parentObj = op_h;
  void* step_h = nullptr;
  chain.startEvent(ctx, &step_h, &step);
  np::EventStateArgs args{};
  args.proxyStep.transSize = 100;
  chain.recordEventState(step_h, np::kProxyStepSendWait, &args);
  chain.stopEvent(step_h);
  chain.stopEvent(op_h);
  CHECK(linkMeter().drain().size() == 1);
  CHECK(chain.pairedInUse() == 0);
  CHECK(chain.finalize(ctx) == ncclSuccess);
}

TEST_CASE("TheExportedChainLoadsTheJobsPluginByNcclsRulesAndClosesItAfterTheLastFinalize") {
  setenv(kJobProfilerPluginVar, CENSUS_PROFILER_LIBRARY, 1);
  const np::ProfilerV5& p = chainedProfiler();
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p.init(&ctx, 0xabc, &mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  void* loaded = dlopen(CENSUS_PROFILER_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(loaded != nullptr);
  dlclose(loaded);
  REQUIRE(p.finalize(ctx) == ncclSuccess);
  CHECK(dlopen(CENSUS_PROFILER_LIBRARY, RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

TEST_CASE("WithoutAChoiceOrNcclsDefaultLibraryThereIsNoJobPlugin") {
  setenv(kJobProfilerPluginVar, "", 1);  // NCCL's default libnccl-profiler.so: not on this machine
  CHECK(loadJobPlugin().table == nullptr);
  unsetenv(kJobProfilerPluginVar);
  CHECK(loadJobPlugin().table == nullptr);
}

// A Coll event goes to the job's plugin as its own event; hangwatch still notes the algorithm
// NCCL chose, whether the job asked for Coll events or they came as implied parents.
TEST_CASE("BesideTheJobsPluginHangwatchStillSeesWhichAlgorithmEachCollectiveRan") {
  for (int job_mask : {static_cast<int>(np::kColl), static_cast<int>(np::kProxyOp), 0}) {
    INFO("job mask " << job_mask);
    proxyProgress().resetForTesting();
    auto [alone, chained] = aloneAndChained(kJob, {job_mask}, oneCommunicator);
    CHECK(alone == chained);  // the job's plugin sees what it sees alone
    uint64_t ring = 0;
    for (const ProxyProgress::AlgorithmView& a : proxyProgress().algorithms())
      if (a.comm_id == 0xc0ffee && std::string(a.algo) == "RING") ring = a.launched;
    CHECK(ring == 3);
  }
  proxyProgress().resetForTesting();
}
