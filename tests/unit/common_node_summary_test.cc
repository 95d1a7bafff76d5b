// nodes/<host>.json (common/node_summary.h): every field of a rank's record and of the stack
// tree survives write -> read, and a reader refuses a summary whose indexes point outside it.
#include <catch2/catch.hpp>

#include "hangwatch/common/node_summary.h"
#include "hangwatch/common/schema/json_codec.h"
#include "sample_records.h"

using namespace hangwatch;

namespace {

SnapshotComm fullComm() {
  SnapshotComm c;
  c.hash = "75d861c1efa30a90";
  c.rank = 8;
  c.size = 16;
  c.device = 0;
  c.state = "live";
  c.last_issued_seq = 1000;
  c.last_completed_seq = 999;
  c.nccl_id = "00ab00cd00ef0012";
  c.address = "0x7f00deadbeef";
  return c;
}

SnapshotPendingOp fullPendingOp(const std::string& comm) {
  SnapshotPendingOp op;
  op.op = "ncclAllReduce";
  op.op_class = "collective";
  op.comm = comm;
  op.seq = 1000;
  op.bytes = 1 << 28;
  op.dtype = "float32";
  op.count = 1 << 26;
  op.peer = 3;
  op.age_s = 301.5;
  op.issued_s_ago = 301.625;
  op.gpu_started = true;
  op.device = 5;  // the stream's device, kept per op in a rank's flat list
  return op;
}

SnapshotHostCall fullHostCall() {
  SnapshotHostCall h;
  h.call = "ncclCommInitRank";
  h.tid = 4243;
  h.thread_name = "pt_main";
  h.age_s = 2.5;
  h.comm = "ab";
  h.seq = 4;
  h.joining = SnapshotJoining{"cd", 1, 2};
  return h;
}

// The NCCL profiler's view: a proxy end, a kernel channel, an algorithm.
void fullProgress(RankRecord& r) {
  r.has_progress = true;
  ProxyEnd e;
  e.nccl_comm = 0xab00cd00ef0012;
  e.comm_rank = 8;
  e.comm_size = 16;
  e.peer = 9;
  e.channel = 3;
  e.send = true;
  e.steps = {1, 2, 3, 4};
  e.moved_s_ago = {0.25f, -1, 3.5f, 301.1f};
  e.ops = 5;
  e.ops_done = 4;
  e.untracked_ops = 1;
  r.proxy_ends.push_back(e);
  r.kernel_channels.push_back({0xab00cd00ef0012, 3, 10, 9, 300.2f});
  r.algorithms.push_back({0xab00cd00ef0012, "RING", 1000, 0.7f});
}

RingProgress fullRing(const SnapshotComm& c) {
  RingProgress ring;
  ring.comm = c.hash;
  ring.nccl_comm = c.nccl_id;
  ring.op = "ncclAllReduce";
  ring.seq = 1000;
  ring.channel = 3;
  ring.rank = 8;
  ring.prev = 7;
  ring.next = 9;
  RingConnection recv;
  recv.peer = 7;
  recv.target_step = 96001;
  recv.observed_step = 96000;
  recv.waiting = true;
  recv.base_step = 95000;
  recv.transport = "NET";
  recv.counter_memory = "host";
  recv.proxy = RingProxyProgress{1, 2, 3, 4, 5, 6};
  ring.recv = recv;
  RingConnection send;
  send.peer = 9;
  send.target_known = false;
  send.observed_step = 12;
  ring.send = send;
  RingConnection child = recv;
  child.direction = "recv";
  child.role = "tree-child";
  ring.connections = {child, send};
  ring.connections[1].direction = "send";
  ring.connections[1].role = "tree-parent";
  ring.comm_rank = 8;
  ring.comm_size = 16;
  ring.algorithm = "RING";
  ring.protocol = "SIMPLE";
  ring.source = "cuda-registers";
  ring.mismatch = RingMismatch{1001, "ncclBroadcast"};
  ring.waiting_threads.push_back({4251, "ch3", "simnccl_wait_peer", "recv"});
  ring.nccl_op_count = 77;
  return ring;
}

// A summary with every kind of field set to something other than its default.
NodeSummary fullSummary() {
  NodeSummary s;
  s.job_id = "job-7";
  s.host = "gpu-node-017";
  s.time_unix_s = 1795266004.125;
  s.covers = {8, 9};
  s.lacks = {10, 15};
  s.files = {{1234567, 1234570}, {0, 99}};
  s.tree = {{-1, FrameKind::kNative, "_start (python3.11)"},
            {0, FrameKind::kPython, "train (train.py:160)"},
            {1, FrameKind::kNative, "ncclAllReduce (libnccl.so.2)"},
            {0, FrameKind::kNative, "clone3 (libc.so.6)"}};
  StackDigest a, b;
  a.add(FrameKind::kNative, "ncclAllReduce (libnccl.so.2)");
  a.add(FrameKind::kPython, "train (train.py:160)");
  a.add(FrameKind::kNative, "_start (python3.11)");
  b.add(FrameKind::kNative, "clone3 (libc.so.6)");
  b.add(FrameKind::kNative, "_start (python3.11)");
  s.classes = {{a.hex(), 2, "8-9", 2}, {b.hex(), 3, "9", 1}, {StackDigest().hex(), -1, "8", 1}};
  RankRecord r;
  r.rank = 8;
  r.has_snapshot = r.has_forensics = true;
  r.forensics_problem = "truncated or corrupt JSON (12 bytes): x";
  r.host = s.host;
  r.pid = 4242;
  r.device = 0;
  r.job_id = s.job_id;
  r.world_size = 16;
  r.snapshot_time_unix_s = 1795266000.05;
  r.timeout_s = 300;
  r.detected_here = true;
  SnapshotComm c = fullComm();
  r.comms.push_back(c);
  r.pending.push_back(fullPendingOp(c.hash));
  r.host_calls.push_back(fullHostCall());
  r.unique_ids_made = {"cd"};
  fullProgress(r);
  r.threads = {{4242, "python3", 0}, {4250, "pt_autograd_0", 2}};
  r.ring_progress.push_back(fullRing(c));
  r.collector_errors = {"python: no frames"};
  r.process_state = "S (sleeping)";
  r.target_exited_during = "debugger";
  r.ras = test::richDump().ras;
  RankState st;
  st.rank = 8;
  st.phase = DumpPhase::kDone;
  st.pid = 4242;
  st.host = s.host;
  st.forensics = "degraded";
  st.exited_seen_by = 9;
  st.stopped_seen_by = 10;
  st.device = 6;
  r.state = st;
  r.suspect = SuspectState{2, 14.5};
  NcclNetInfo net;
  net.net = "IB";
  net.devices = {{3, "mlx5_3", 1}, {8, "mlx5_0+mlx5_1", std::nullopt}};
  net.connections = {{2, 8, 9, true, 3}, {2, 7, 8, false, 8}};
  net.unread = "part";
  net.lines_dropped = 4;
  r.nccl_net = net;
  s.ranks.push_back(r);
  RankRecord bare;  // a rank whose files said nothing usable: every field at its default
  bare.rank = 9;
  bare.threads = {{1, "t", 1}};
  s.ranks.push_back(bare);
  return s;
}

}  // namespace

TEST_CASE("NodeSummaryRoundTripsEveryField") {
  const NodeSummary s = fullSummary();
  const nlohmann::json written = toJson(s);
  Expected<NodeSummary> back = nodeSummaryFromText(written.dump());
  REQUIRE(back.ok());
  CHECK(toJson(*back) == written);
  const RankRecord& r = back->ranks.at(0);
  CHECK(r.proxy_ends.at(0).moved_s_ago[0] == 0.25f);
  CHECK(r.proxy_ends.at(0).moved_s_ago[1] == -1.0f);
  CHECK(r.proxy_ends.at(0).steps[3] == 4);
  CHECK(r.kernel_channels.at(0).started_s_ago == 300.2f);
  CHECK(r.host_calls.at(0).joining->comm == "cd");
  CHECK(r.unique_ids_made == std::vector<std::string>{"cd"});
  CHECK(r.ring_progress.at(0).recv->proxy->done == 6);
  CHECK_FALSE(r.ring_progress.at(0).send->target_known);
  REQUIRE(r.ring_progress.at(0).connections.size() == 2);
  CHECK(r.ring_progress.at(0).connections[0].role == "tree-child");
  CHECK(r.ring_progress.at(0).connections[1].direction == "send");
  CHECK(r.state->exited_seen_by == 9);
  CHECK(r.state->stopped_seen_by == 10);
  CHECK(r.state->device == 6);
  CHECK(r.suspect->resumed_after_s == 14.5);
  REQUIRE(r.nccl_net);
  CHECK(r.nccl_net->connections.at(1).net_dev == 8);
  CHECK_FALSE(r.nccl_net->connections.at(1).send);
  CHECK(r.nccl_net->device(3)->port == std::optional<int>(1));
  CHECK_FALSE(back->ranks.at(1).nccl_net);
  REQUIRE(r.ras);
  CHECK(r.ras->communicators.at(0).missing.at(0).considered_dead);
  CHECK_FALSE(back->ranks.at(1).ras);
  CHECK(back->ranks.at(1).snapshot_time_unix_s == 0);
  CHECK_FALSE(back->ranks.at(1).device);
  CHECK(back->lacks == std::vector<int>{10, 15});
  CHECK(back->classes.at(2).leaf == -1);
  CHECK(back->files.at(0).forensics == 1234570);
  // Defaults are left out: a rank record with nothing to say is small.
  CHECK(written["ranks"][1].size() < 8);
}

TEST_CASE("NodeSummaryReaderRefusesIndexesOutsideTheFile") {
  auto refused = [](NodeSummary s) {
    Expected<NodeSummary> back = nodeSummaryFromText(toJson(s).dump());
    INFO(toJson(s).dump().substr(0, 200));
    REQUIRE_FALSE(back.ok());
    return back.error();
  };
  NodeSummary s = fullSummary();
  s.tree[1].parent = 1;  // its own parent: a loop
  CHECK_THAT(refused(s), Catch::Contains("tree node 1 has parent 1"));
  s = fullSummary();
  s.classes[0].leaf = 4;
  CHECK_THAT(refused(s), Catch::Contains("outside the tree"));
  s = fullSummary();
  s.ranks[1].threads[0].stack = 3;
  CHECK_THAT(refused(s), Catch::Contains("names stack class 3 of 3"));
  s = fullSummary();
  s.covers = {8, 10};
  CHECK_THAT(refused(s), Catch::Contains("record 1 is of rank 9"));
  s = fullSummary();
  s.covers = {9, 8};
  CHECK_THAT(refused(s), Catch::Contains("covers"));
  s = fullSummary();
  s.covers.pop_back();
  CHECK_THAT(refused(s), Catch::Contains("ranks do not match"));
  s = fullSummary();
  s.files.pop_back();
  CHECK_THAT(refused(s), Catch::Contains("files do not match"));
  CHECK_FALSE(nodeSummaryFromText("{\"classes\": [").ok());
  CHECK_FALSE(nodeSummaryFromText("[]").ok());
}

TEST_CASE("StackDigestTellsFramesApart") {
  auto hex = [](std::vector<std::pair<FrameKind, std::string>> frames) {
    StackDigest d;
    for (const auto& [k, l] : frames) d.add(k, l);
    return d.hex();
  };
  const std::string one = hex({{FrameKind::kNative, "a"}, {FrameKind::kNative, "bc"}});
  CHECK(one.size() == 32);
  CHECK(one == hex({{FrameKind::kNative, "a"}, {FrameKind::kNative, "bc"}}));
  CHECK(one != hex({{FrameKind::kNative, "ab"}, {FrameKind::kNative, "c"}}));  // the label lengths count
  CHECK(one != hex({{FrameKind::kPython, "a"}, {FrameKind::kNative, "bc"}}));
  CHECK(one != hex({{FrameKind::kNative, "bc"}, {FrameKind::kNative, "a"}}));
  CHECK(hex({}) != hex({{FrameKind::kNative, ""}}));
}
