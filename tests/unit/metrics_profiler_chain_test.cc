// hangwatch's profiler plugin in front of the job's own one (metrics/profiler_chain.h):
// every callback reaches both, each with its own context and handles, and PXN events of
// another process give neither anything to dereference.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "hangwatch/common/nccl_profiler_v5.h"
#include "hangwatch/watchdog/metrics/link_meter.h"
#include "hangwatch/watchdog/metrics/profiler_chain.h"

namespace np = hangwatch::nccl_profiler;

#ifndef RECORDING_PROFILER_LIBRARY
#error "RECORDING_PROFILER_LIBRARY must name the fixture plugin"
#endif

namespace {

// Mirrors tests/unit/fixtures/recording_profiler.cc.
struct RecordedEvent {
  uint64_t type;
  void* context;
  void* parent;
  void* handle;
  int states = 0;
  bool stopped = false;
};
struct RecordingLog {
  std::mutex mutex;
  int inits = 0, finalizes = 0;
  uint64_t comm_id = 0;
  void* context = nullptr;
  void* finalized_context = nullptr;
  std::vector<RecordedEvent> events;
};

RecordingLog& jobPluginLog() {
  // The chain loads the library RTLD_LOCAL; this finds the same loaded copy.
  void* lib = dlopen(RECORDING_PROFILER_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto log = reinterpret_cast<RecordingLog* (*)()>(dlsym(lib, "recording_profiler_log"));
  REQUIRE(log != nullptr);
  return *log();
}

np::EventDescr proxyOp(pid_t pid, void* parent, int peer) {
  np::EventDescr d{};
  d.type = np::kProxyOp;
  d.parentObj = parent;
  d.proxyOp.pid = pid;
  d.proxyOp.peer = peer;
  d.proxyOp.isSend = 1;
  return d;
}

np::EventDescr proxyStep(void* parent, int step) {
  np::EventDescr d{};
  d.type = np::kProxyStep;
  d.parentObj = parent;
  d.proxyStep.step = step;
  return d;
}

}  // namespace

TEST_CASE("TheJobsOwnProfilerGetsEveryCallbackWithItsOwnContextAndHandles") {
  setenv(hangwatch::watchdog::kJobProfilerPluginVar, RECORDING_PROFILER_LIBRARY, 1);
  const np::ProfilerV5& p = hangwatch::watchdog::chainedProfiler();
  hangwatch::watchdog::linkMeter().drain();
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p.init(&ctx, 0xabc, &mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  RecordingLog& job = jobPluginLog();
  CHECK(job.inits == 1);
  CHECK(job.comm_id == 0xabc);
  CHECK((mask & np::kColl) != 0);       // the job's plugin asked for it
  CHECK((mask & np::kProxyStep) != 0);  // hangwatch did
  CHECK(ctx != job.context);

  np::EventDescr coll{};
  coll.type = np::kColl;
  void* coll_h = nullptr;
  REQUIRE(p.startEvent(ctx, &coll_h, &coll) == ncclSuccess);
  REQUIRE(coll_h != nullptr);
  np::EventDescr op = proxyOp(::getpid(), coll_h, 1);
  void* op_h = nullptr;
  REQUIRE(p.startEvent(ctx, &op_h, &op) == ncclSuccess);
  REQUIRE(op_h != nullptr);
  np::EventDescr step = proxyStep(op_h, 0);
  void* step_h = nullptr;
  REQUIRE(p.startEvent(ctx, &step_h, &step) == ncclSuccess);
  np::EventStateArgs args{};
  args.proxyStep.transSize = 4096;
  p.recordEventState(step_h, np::kProxyStepSendWait, &args);
  p.stopEvent(step_h);
  p.stopEvent(op_h);
  p.stopEvent(coll_h);
  {
    std::lock_guard<std::mutex> lock(job.mutex);
    REQUIRE(job.events.size() == 3);
    for (const RecordedEvent& e : job.events) {
      CHECK(e.context == job.context);
      CHECK(e.stopped);
    }
    CHECK(job.events[0].parent == nullptr);
    CHECK(job.events[1].parent == job.events[0].handle);  // its own handle, not hangwatch's
    CHECK(job.events[2].parent == job.events[1].handle);
    CHECK(job.events[2].states == 1);
  }
  auto links = hangwatch::watchdog::linkMeter().drain();
  REQUIRE(links.size() == 1);
  CHECK(links[0].bytes == 4096);

  // PXN: another process's operation, with that process's context and parent pointers.
  void* foreign_context = reinterpret_cast<void*>(0x10);
  void* foreign_parent = reinterpret_cast<void*>(0x20);
  np::EventDescr remote = proxyOp(::getpid() + 1, foreign_parent, 1);
  void* remote_h = nullptr;
  REQUIRE(p.startEvent(foreign_context, &remote_h, &remote) == ncclSuccess);
  REQUIRE(remote_h != nullptr);
  np::EventDescr remote_step = proxyStep(remote_h, 0);
  void* remote_step_h = nullptr;
  REQUIRE(p.startEvent(foreign_context, &remote_step_h, &remote_step) == ncclSuccess);
  p.recordEventState(remote_step_h, np::kProxyStepSendWait, &args);
  p.stopEvent(remote_step_h);
  p.stopEvent(remote_h);
  {
    std::lock_guard<std::mutex> lock(job.mutex);
    REQUIRE(job.events.size() == 5);
    CHECK(job.events[3].context == nullptr);
    CHECK(job.events[3].parent == foreign_parent);  // the plugin checks the pid itself
    CHECK(job.events[4].context == nullptr);
    CHECK(job.events[4].parent == job.events[3].handle);
  }
  CHECK(hangwatch::watchdog::linkMeter().drain().empty());

  REQUIRE(p.finalize(ctx) == ncclSuccess);
  CHECK(job.finalizes == 1);
  CHECK(job.finalized_context == job.context);
}

TEST_CASE("WithoutAJobProfilerTheCallbacksAreHangwatchsOwn") {
  setenv(hangwatch::watchdog::kJobProfilerPluginVar, "/nonexistent/libnccl-profiler-gone.so", 1);
  const np::ProfilerV5& p = hangwatch::watchdog::chainedProfiler();
  hangwatch::watchdog::linkMeter().drain();
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p.init(&ctx, 0xdef, &mask, "", 1, 2, 0, nullptr) == ncclSuccess);
  CHECK(mask == static_cast<int>(np::kProxyOp | np::kProxyStep | np::kKernelCh));
  np::EventDescr op = proxyOp(::getpid(), nullptr, 1);
  void* op_h = nullptr;
  p.startEvent(ctx, &op_h, &op);
  REQUIRE(op_h != nullptr);
  np::EventDescr step = proxyStep(op_h, 0);
  void* step_h = nullptr;
  p.startEvent(ctx, &step_h, &step);
  np::EventStateArgs args{};
  args.proxyStep.transSize = 100;
  p.recordEventState(step_h, np::kProxyStepSendWait, &args);
  p.stopEvent(step_h);
  p.stopEvent(op_h);
  CHECK(hangwatch::watchdog::linkMeter().drain().size() == 1);
  CHECK(p.finalize(ctx) == ncclSuccess);
}
