#include <catch2/catch.hpp>
#include <unistd.h>
#include <cstdint>
#include <vector>

#include "hangwatch/common/nccl_profiler_v5.h"
#include "hangwatch/watchdog/metrics/link_meter.h"
#include "hangwatch/watchdog/metrics/link_profiler.h"

using hangwatch::watchdog::LinkKey;
using hangwatch::watchdog::LinkMeter;
namespace np = hangwatch::nccl_profiler;

TEST_CASE("LinkBusyTimeIsTheUnionOfItsStepsOnTheWire") {
  LinkMeter m;
  LinkKey k{0xabc, 4, 1, 2};
  m.add(k, 100, 1000, 2000);
  m.add(k, 100, 1500, 2500);  // another channel, overlapping: 500 ns more
  m.add(k, 100, 4000, 4000);  // done at once: bytes and a step, no wire time
  m.add(k, 100, 5000, 5300);
  auto w = m.drain();
  REQUIRE(w.size() == 1);
  CHECK(w[0].comm == "0xabc");
  CHECK(w[0].comm_size == 4);
  CHECK(w[0].comm_rank == 1);
  CHECK(w[0].peer == 2);
  CHECK(w[0].bytes == 400);
  CHECK(w[0].steps == 4);
  CHECK(w[0].busy_ns == 1000 + 500 + 300);
}

TEST_CASE("DrainResetsTheWindowAndForgetsIdleLinks") {
  LinkMeter m;
  m.add({1, 2, 0, 1}, 10, 0, 10);
  m.add({2, 2, 0, 1}, 10, 0, 10);
  CHECK(m.drain().size() == 2);
  m.add({1, 2, 0, 1}, 10, 5, 20);  // overlaps the last window's interval: only 10..20 is new
  auto w = m.drain();
  REQUIRE(w.size() == 1);
  CHECK(w[0].bytes == 10);
  CHECK(w[0].busy_ns == 10);
  CHECK(m.drain().empty());
}

TEST_CASE("LinkTableIsBoundedAndCountsWhatItDrops") {
  LinkMeter m;
  for (int peer = 0; peer < static_cast<int>(LinkMeter::kMaxLinks) + 5; ++peer) m.add({1, 1000, 0, peer}, 1, 0, 1);
  CHECK(m.drain().size() == LinkMeter::kMaxLinks);
  CHECK(m.dropped() == 5);
}

TEST_CASE("ProfilerPluginTurnsSendProxyStepsIntoLinkTotals") {
  const np::ProfilerV5& p = hangwatch::watchdog::linkProfiler();
  hangwatch::watchdog::linkMeter().drain();
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p.init(&ctx, 0x5eed, &mask, "", 1, 4, 3, nullptr) == ncclSuccess);
  CHECK((mask & np::kProxyStep) != 0);
  CHECK((mask & np::kColl) == 0);  // proxy progress and kernel channels only
  CHECK((mask & np::kKernelCh) != 0);

  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.peer = 0;
  op.proxyOp.isSend = 1;
  void* op_handle = nullptr;
  p.startEvent(ctx, &op_handle, &op);
  REQUIRE(op_handle != nullptr);
  // Receives are followed (proxy progress) but never timed as the link: their wait
  // includes the sender's upstream.
  np::EventDescr recv = op;
  recv.proxyOp.isSend = 0;
  void* recv_handle = nullptr;
  p.startEvent(ctx, &recv_handle, &recv);
  REQUIRE(recv_handle != nullptr);
  np::EventDescr recv_step{};
  recv_step.type = np::kProxyStep;
  recv_step.parentObj = recv_handle;
  void* rh = nullptr;
  p.startEvent(ctx, &rh, &recv_step);
  p.recordEventState(rh, np::kProxyStepRecvWait, nullptr);
  p.recordEventState(rh, np::kProxyStepRecvFlushWait, nullptr);
  p.recordEventState(rh, np::kProxyStepRecvGPUWait, nullptr);
  p.stopEvent(rh);
  p.stopEvent(recv_handle);

  for (int s = 0; s < 3; ++s) {
    np::EventDescr step{};
    step.type = np::kProxyStep;
    step.parentObj = op_handle;
    step.proxyStep.step = s;
    void* h = nullptr;
    p.startEvent(ctx, &h, &step);
    REQUIRE(h != nullptr);
    p.recordEventState(h, np::kProxyStepSendGPUWait, nullptr);
    np::EventStateArgs args{};
    args.proxyStep.transSize = 65536;
    p.recordEventState(h, np::kProxyStepSendWait, &args);
    p.stopEvent(h);
  }
  // A step stopped before it reached the wire moved nothing.
  np::EventDescr early{};
  early.type = np::kProxyStep;
  early.parentObj = op_handle;
  void* h = nullptr;
  p.startEvent(ctx, &h, &early);
  p.stopEvent(h);
  p.stopEvent(op_handle);
  p.finalize(ctx);

  auto w = hangwatch::watchdog::linkMeter().drain();
  REQUIRE(w.size() == 1);
  CHECK(w[0].comm == "0x5eed");
  CHECK(w[0].comm_rank == 3);
  CHECK(w[0].peer == 0);
  CHECK(w[0].steps == 3);
  CHECK(w[0].bytes == 3 * 65536);
}

TEST_CASE("AnotherProcesssProxyOperationUnderPxnIsNeverDereferenced") {
  // NCCL hands the originating process's context pointer to this process's plugin; here
  // it points nowhere, as it would in this address space.
  const np::ProfilerV5& p = hangwatch::watchdog::linkProfiler();
  hangwatch::watchdog::linkMeter().drain();
  void* foreign_context = reinterpret_cast<void*>(0x10);
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.parentObj = reinterpret_cast<void*>(0x20);
  op.proxyOp.pid = ::getpid() + 1;
  op.proxyOp.peer = 1;
  op.proxyOp.isSend = 1;
  void* handle = reinterpret_cast<void*>(1);
  CHECK(p.startEvent(foreign_context, &handle, &op) == ncclSuccess);
  CHECK(handle == nullptr);
  np::EventDescr step{};
  step.type = np::kProxyStep;
  step.parentObj = handle;
  CHECK(p.startEvent(foreign_context, &handle, &step) == ncclSuccess);
  CHECK(handle == nullptr);
  CHECK(hangwatch::watchdog::linkMeter().drain().empty());
}
