// Ring progress from NCCL's own profiler events (issue 12): the plugin counts each
// network connection's steps by stage and each kernel channel's starts and stops, in
// fixed tables the proxy threads update without locks; NCCL's communicator id is tied
// to the communicator the watchdog saw created. Event orders are NCCL 2.28's
// (src/transport/net.cc, src/plugin/profiler.cc).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "hangwatch/watchdog/comm_identity.h"
#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/common/nccl_profiler_v5.h"
#include "hangwatch/watchdog/metrics/link_profiler.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"
#include "hangwatch/watchdog/metrics/proxy_progress.h"
#include "hangwatch/watchdog/snapshot_builder.h"

using namespace hangwatch;
using namespace hangwatch::watchdog;
namespace np = hangwatch::nccl_profiler;

namespace {

const np::ProfilerV5& plugin() { return linkProfiler(); }

void* initComm(uint64_t comm_id, int nranks, int rank) {
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(plugin().init(&ctx, comm_id, &mask, "", 2, nranks, rank, nullptr) == ncclSuccess);
  REQUIRE(ctx != nullptr);
  return ctx;
}

void* startOp(void* ctx, int channel, int peer, bool send) {
  np::EventDescr d{};
  d.type = np::kProxyOp;
  d.proxyOp.pid = ::getpid();
  d.proxyOp.channelId = static_cast<uint8_t>(channel);
  d.proxyOp.peer = peer;
  d.proxyOp.isSend = send ? 1 : 0;
  void* h = nullptr;
  plugin().startEvent(ctx, &h, &d);
  return h;
}

void* startStep(void* ctx, void* op, int step) {
  np::EventDescr d{};
  d.type = np::kProxyStep;
  d.parentObj = op;
  d.proxyStep.step = step;
  void* h = nullptr;
  plugin().startEvent(ctx, &h, &d);
  return h;
}

// One step through the given states, stopped or not.
void runStep(void* ctx, void* op, int step, std::initializer_list<np::EventState> states, bool stop) {
  void* h = startStep(ctx, op, step);
  REQUIRE(h != nullptr);
  for (np::EventState s : states) plugin().recordEventState(h, s, nullptr);
  if (stop) plugin().stopEvent(h);
}

// A copy of one connection's view (none when the table does not have it).
std::optional<ProxyConnection::View> find(const std::vector<ProxyConnection::View>& all, uint64_t comm, int channel,
                                          int peer, bool send) {
  for (const auto& v : all)
    if (v.key.comm_id == comm && v.key.channel == channel && v.key.peer == peer && v.key.send == send) return v;
  return std::nullopt;
}

// The watchdog's tables a snapshot reads, empty, with the process's profiler progress.
struct SnapshotTables {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  NcclCommIds ids;
  SnapshotInputs inputs() {
    SnapshotInputs in;
    in.queues = &queues;
    in.comms = &comms;
    in.host_calls = &slots;
    in.progress = &proxyProgress();
    in.nccl_ids = &ids;
    return in;
  }
};

constexpr auto kGpuWait = np::kProxyStepSendGPUWait;
constexpr auto kPeerWait = np::kProxyStepSendPeerWait;
constexpr auto kSendWait = np::kProxyStepSendWait;
constexpr auto kRecvWait = np::kProxyStepRecvWait;
constexpr auto kFlushWait = np::kProxyStepRecvFlushWait;
constexpr auto kRecvGpuWait = np::kProxyStepRecvGPUWait;

}  // namespace

TEST_CASE("ProxyStepsAreCountedByStageAsNcclsNetTransportRecordsThem") {
  proxyProgress().resetForTesting();
  void* ctx = initComm(0xc0ffee, 8, 1);
  void* send = startOp(ctx, 3, 2, true);
  void* recv = startOp(ctx, 3, 0, false);
  REQUIRE(send != nullptr);
  REQUIRE(recv != nullptr);
  for (int s = 0; s < 3; ++s) runStep(ctx, send, s, {kGpuWait, kPeerWait, kSendWait}, true);
  runStep(ctx, send, 3, {kGpuWait}, false);                                  // the GPU never filled it
  runStep(ctx, send, 4, {kGpuWait, kPeerWait, kPeerWait, kSendWait}, false);  // isend retried, then on the wire
  for (int s = 0; s < 2; ++s) runStep(ctx, recv, s, {kRecvWait, kFlushWait, kRecvGpuWait}, true);
  runStep(ctx, recv, 2, {kRecvWait}, false);              // nothing arrived
  runStep(ctx, recv, 3, {kRecvWait, kFlushWait}, false);  // arrived, not yet flushed to the GPU

  auto all = proxyProgress().connections();
  const auto s = find(all, 0xc0ffee, 3, 2, true);
  const auto r = find(all, 0xc0ffee, 3, 0, false);
  REQUIRE(s);
  REQUIRE(r);
  CHECK(std::vector<uint64_t>(s->steps, s->steps + 4) == std::vector<uint64_t>{5, 4, 4, 3});
  CHECK(std::vector<uint64_t>(r->steps, r->steps + 4) == std::vector<uint64_t>{4, 3, 2, 2});
  CHECK((s->rank == 1 && s->nranks == 8));
  CHECK((s->ops_started == 1 && s->ops_done == 0));
  for (int i = 0; i < 4; ++i) CHECK(s->moved_ns[i] > 0);
  plugin().stopEvent(send);
  CHECK(find(proxyProgress().connections(), 0xc0ffee, 3, 2, true)->ops_done == 1);
  plugin().stopEvent(recv);
  plugin().finalize(ctx);
}

TEST_CASE("ARecvStepThatNeverGotAReceivePostedIsNotCounted") {
  // NCCL starts the step before irecv and starts it again when irecv could not post.
  proxyProgress().resetForTesting();
  void* ctx = initComm(0xabc, 2, 0);
  void* recv = startOp(ctx, 0, 1, false);
  startStep(ctx, recv, 0);
  runStep(ctx, recv, 0, {kRecvWait}, false);
  const auto r = find(proxyProgress().connections(), 0xabc, 0, 1, false);
  REQUIRE(r);
  CHECK(r->steps[0] == 1);
  CHECK(r->moved_ns[1] == 0);
  plugin().stopEvent(recv);
  plugin().finalize(ctx);
}

TEST_CASE("KernelChannelsCountStartsAndStops") {
  proxyProgress().resetForTesting();
  void* ctx = initComm(0x5eed, 4, 2);
  auto kernelCh = [&](int channel) {
    np::EventDescr d{};
    d.type = np::kKernelCh;
    d.kernelCh.channelId = static_cast<uint8_t>(channel);
    d.kernelCh.pTimer = 123;
    void* h = nullptr;
    plugin().startEvent(ctx, &h, &d);
    return h;
  };
  for (int k = 0; k < 3; ++k) {
    void* h = kernelCh(0);
    REQUIRE(h != nullptr);
    np::EventStateArgs a{};
    a.kernelCh.pTimer = 456;
    plugin().recordEventState(h, np::kKernelChStop, &a);
    plugin().stopEvent(h);
  }
  REQUIRE(kernelCh(0) != nullptr);  // the fourth kernel hangs on channel 0
  REQUIRE(kernelCh(1) != nullptr);
  auto channels = proxyProgress().kernelChannels();
  REQUIRE(channels.size() == 2);
  for (const auto& k : channels) {
    CHECK(k.comm_id == 0x5eed);
    if (k.channel == 0) CHECK((k.started == 4 && k.stopped == 3 && k.stopped_ns > 0));
    if (k.channel == 1) CHECK((k.started == 1 && k.stopped == 0 && k.stopped_ns == 0));
  }
  plugin().finalize(ctx);
}

TEST_CASE("OperationsBeyondAConnectionsRecordsAreCountedNotTracked") {
  proxyProgress().resetForTesting();
  void* ctx = initComm(0x77, 2, 0);
  std::vector<void*> ops;
  for (int i = 0; i < 5; ++i) ops.push_back(startOp(ctx, 0, 1, true));
  CHECK(ops[4] == nullptr);
  CHECK(startStep(ctx, ops[4], 0) == nullptr);
  const auto c = find(proxyProgress().connections(), 0x77, 0, 1, true);
  REQUIRE(c);
  CHECK((c->ops_started == 5 && c->untracked_ops == 1));
  plugin().stopEvent(ops[0]);
  void* again = startOp(ctx, 0, 1, true);  // a record freed by a stopped operation is reused
  CHECK(again == ops[0]);
  for (void* op : {ops[1], ops[2], ops[3], again}) plugin().stopEvent(op);
  plugin().finalize(ctx);
}

TEST_CASE("TheConnectionTableIsBoundedAndCountsWhatItDrops") {
  auto table = std::make_unique<ProxyProgress>();
  for (int peer = 0; peer < static_cast<int>(ProxyProgress::kMaxConnections) + 3; ++peer)
    table->connection({1, 0, peer, true}, 0, 4096);
  CHECK(table->connections().size() == ProxyProgress::kMaxConnections);
  CHECK(table->droppedConnections() == 3);
  CHECK(table->connection({1, 0, 7, true}, 0, 4096) != nullptr);  // a known one is still found
  for (int c = 0; c < static_cast<int>(ProxyProgress::kMaxKernelChannels) + 1; ++c) table->kernelChannel(9, c);
  CHECK(table->droppedKernelChannels() == 1);
}

TEST_CASE("AnotherProcessesOperationUnderPxnLeavesNoProgressHere") {
  proxyProgress().resetForTesting();
  np::EventDescr op{};
  op.type = np::kProxyOp;
  op.proxyOp.pid = ::getpid() + 1;
  op.proxyOp.isSend = 1;
  void* h = reinterpret_cast<void*>(1);
  plugin().startEvent(reinterpret_cast<void*>(0x10), &h, &op);  // a context of another address space
  CHECK(h == nullptr);
  CHECK(proxyProgress().connections().empty());
}

TEST_CASE("ProxyThreadsAndTheSnapshotReaderShareTheTables") {
  proxyProgress().resetForTesting();
  void* ctx = initComm(0x7a5a, 4, 0);
  constexpr int kOps = 200;
  auto proxy = [&](int channel) {
    for (int i = 0; i < kOps; ++i) {
      void* send = startOp(ctx, channel, 1, true);
      for (int s = 0; s < 8; ++s) {
        void* h = startStep(ctx, send, s);
        for (auto st : {kGpuWait, kPeerWait, kSendWait}) plugin().recordEventState(h, st, nullptr);
        plugin().stopEvent(h);
      }
      plugin().stopEvent(send);
      np::EventDescr k{};
      k.type = np::kKernelCh;
      k.kernelCh.channelId = static_cast<uint8_t>(channel);
      void* kh = nullptr;
      plugin().startEvent(ctx, &kh, &k);
      plugin().stopEvent(kh);
    }
  };
  // A user thread launching collectives (Coll events come on the launching thread).
  auto launcher = [&] {
    for (int i = 0; i < kOps; ++i) {
      np::EventDescr c{};
      c.type = np::kColl;
      c.coll.algo = i % 2 ? "RING" : "TREE";
      void* ch = nullptr;
      plugin().startEvent(ctx, &ch, &c);
    }
  };
  std::thread a(proxy, 0), b(proxy, 1), l(launcher);
  uint64_t seen = 0;
  for (int i = 0; i < 50; ++i) {
    for (const auto& v : proxyProgress().connections()) seen += v.steps[3];
    for (const auto& k : proxyProgress().kernelChannels()) seen += k.stopped;
    for (const auto& g : proxyProgress().algorithms()) seen += g.launched;
  }
  l.join();
  for (const auto& g : proxyProgress().algorithms()) CHECK(g.launched == kOps / 2u);
  a.join();
  b.join();
  for (int channel : {0, 1}) {
    const auto c = find(proxyProgress().connections(), 0x7a5a, channel, 1, true);
    REQUIRE(c);
    CHECK(c->steps[3] == kOps * 8u);
    CHECK(c->ops_done == static_cast<uint64_t>(kOps));
  }
  for (const auto& k : proxyProgress().kernelChannels()) CHECK(k.stopped == static_cast<uint64_t>(kOps));
  (void)seen;
  plugin().finalize(ctx);
}

TEST_CASE("AnInitOnTheCreatingThreadGivesThatCommunicatorNcclsId") {
  NcclCommIds ids;
  {
    NcclCommIds::Capture capture;
    ids.initSeen(0x1111, 4, 2);
    CHECK(capture.id() == std::optional<uint64_t>(0x1111));
  }
  CHECK(ids.pendingNotes() == 0);
  {
    NcclCommIds::Capture capture;  // two communicators made in one call: neither is told apart
    ids.initSeen(0x2222, 4, 0);
    ids.initSeen(0x3333, 4, 1);
    CHECK_FALSE(capture.id());
  }
  CHECK(ids.pendingNotes() == 2);
  {
    NcclCommIds::Capture capture;  // non-blocking: NCCL's init runs later, elsewhere
    CHECK_FALSE(capture.id());
  }
  CHECK(ids.initsSeen() == 3);
}

TEST_CASE("IdsFromOtherThreadsAreTiedOnlyWhenExactlyOneNoteAndOneCommunicatorFit") {
  NcclCommIds ids;
  CommTable comms;
  CommEntry* only = comms.add(0x10, 0xa, 0, 4, 0);
  CommEntry* twin_a = comms.add(0x20, 0xb, 1, 4, 0);
  CommEntry* twin_b = comms.add(0x30, 0xc, 1, 4, 0);
  CommEntry* crowded = comms.add(0x40, 0xd, 2, 4, 0);
  CommEntry* unknown_yet = comms.add(0x50, 0xe, -1, 0, -1);  // a split child still initializing
  std::thread([&] {
    ids.initSeen(0x100, 4, 0);
    ids.initSeen(0x200, 4, 1);
    ids.initSeen(0x300, 4, 2);
    ids.initSeen(0x301, 4, 2);
    ids.initSeen(0x400, 8, 3);
  }).join();
  tieNcclIds(comms, ids);
  CHECK(only->nccl_id == 0x100u);
  CHECK(twin_a->nccl_id == 0u);  // two communicators of rank 1 of 4: whose is it?
  CHECK(twin_b->nccl_id == 0u);
  CHECK(crowded->nccl_id == 0u);  // two notes of rank 2 of 4
  CHECK(unknown_yet->nccl_id == 0u);
  unknown_yet->rank = 3;
  unknown_yet->size = 8;  // its identity completed
  tieNcclIds(comms, ids);
  CHECK(unknown_yet->nccl_id == 0x400u);
  CHECK(ids.pendingNotes() == 3);
}

TEST_CASE("TheSnapshotCarriesNcclIdsAddressesAndProgress") {
  proxyProgress().resetForTesting();
  SnapshotTables tables;
  CommEntry* e = tables.comms.add(0x55d0c0a01000, 0xabc, 1, 8, 0);
  e->nccl_id = 0xc0ffee;
  SnapshotInputs in = tables.inputs();
  NcclCommIds& ids = tables.ids;
  CHECK_FALSE(buildSnapshot(in).progress);  // no plugin init here: nothing to say, not "no progress"
  {
    NcclCommIds::Capture capture;
    ids.initSeen(0xc0ffee, 8, 1);
  }
  void* ctx = initComm(0xc0ffee, 8, 1);
  void* send = startOp(ctx, 0, 2, true);
  runStep(ctx, send, 0, {kGpuWait, kPeerWait, kSendWait}, false);
  in.now_ns = monotonicNs() + 2'000'000'000;
  WatchdogSnapshot s = buildSnapshot(in);
  REQUIRE(s.comms.size() == 1);
  CHECK(s.comms[0].nccl_id == "0000000000c0ffee");
  CHECK(s.comms[0].address == "0x55d0c0a01000");
  REQUIRE(s.progress);
  CHECK(s.progress->plugin_inits == 1);
  REQUIRE(s.progress->connections.size() == 1);
  const SnapshotProxyConnection& c = s.progress->connections[0];
  CHECK(c.nccl_comm == s.comms[0].nccl_id);
  CHECK((c.dir == "send" && c.peer == 2 && c.rank == 1 && c.nranks == 8));
  CHECK(c.steps == std::array<uint64_t, 4>{1, 1, 1, 0});
  REQUIRE(c.moved_s_ago[2]);
  CHECK(*c.moved_s_ago[2] == Approx(2.0).margin(0.5));
  CHECK_FALSE(c.moved_s_ago[3]);
  plugin().stopEvent(send);
  plugin().finalize(ctx);
}

// NCCL sends a Coll event at launch as the implied parent of the task events hangwatch asks
// for, with the algorithm it chose (src/enqueue.cc: coll.algo = ncclAlgoToString(...)).
TEST_CASE("EachCommunicatorsCollectivesAreCountedByTheAlgorithmNcclChose") {
  proxyProgress().resetForTesting();
  void* a = initComm(0xa1, 8, 0);
  void* b = initComm(0xb2, 8, 0);
  auto launch = [](void* ctx, const char* algo) {
    np::EventDescr d{};
    d.type = np::kColl;
    d.coll.func = "AllReduce";
    d.coll.algo = algo;
    d.coll.proto = "SIMPLE";
    void* h = reinterpret_cast<void*>(0x1);
    REQUIRE(plugin().startEvent(ctx, &h, &d) == ncclSuccess);
    CHECK(h == nullptr);  // nothing to stop: the steps say the rest
  };
  launch(a, "RING");
  launch(a, "RING");
  launch(a, "TREE");
  launch(b, "PAT");
  launch(b, "SOMETHING_NEWER");
  launch(b, nullptr);
  std::vector<ProxyProgress::AlgorithmView> seen = proxyProgress().algorithms();
  auto count = [&](uint64_t comm, std::string algo) -> uint64_t {
    for (const auto& v : seen)
      if (v.comm_id == comm && v.algo == algo) return v.launched;
    return 0;
  };
  CHECK(count(0xa1, "RING") == 2);
  CHECK(count(0xa1, "TREE") == 1);
  CHECK(count(0xb2, "PAT") == 1);
  CHECK(count(0xb2, "other") == 2);  // a name this build does not know, or none
  CHECK(seen.size() == 4);
  for (const auto& v : seen) CHECK(v.last_ns > 0);

  SnapshotTables tables;
  {
    NcclCommIds::Capture capture;
    tables.ids.initSeen(0xa1, 8, 0);
  }
  SnapshotInputs in = tables.inputs();
  in.now_ns = monotonicNs() + 1'000'000'000;
  WatchdogSnapshot s = buildSnapshot(in);
  REQUIRE(s.progress);
  REQUIRE(s.progress->algorithms.size() == 4);
  const SnapshotCollAlgorithm& first = s.progress->algorithms[0];  // sorted by communicator, then name
  CHECK(first.nccl_comm == "00000000000000a1");
  CHECK(first.algo == "RING");
  CHECK(first.launched == 2);
  REQUIRE(first.last_s_ago);
  CHECK(*first.last_s_ago == Approx(1.0).margin(0.5));
  CHECK(s.progress->dropped_comms == 0);
  plugin().finalize(a);
  plugin().finalize(b);
}

TEST_CASE("TheAlgorithmTableIsBoundedAndCountsWhatItDrops") {
  proxyProgress().resetForTesting();
  for (uint64_t c = 1; c <= ProxyProgress::kMaxComms + 3; ++c) proxyProgress().collLaunched(c, "RING", 1);
  CHECK(proxyProgress().algorithms().size() == ProxyProgress::kMaxComms);
  CHECK(proxyProgress().droppedComms() == 3);
  proxyProgress().resetForTesting();
}
