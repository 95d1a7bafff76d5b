#pragma once
// Records with every field the collector and the watchdog write, with strings that need
// escaping: what the round-trip tests (common) and the reader-agreement tests (dumpio) use.
#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::test {

inline ThreadStack richThread() {
  ThreadStack t;
  t.tid = 77;
  t.name = "MainThread";
  t.os_name = "python3";
  t.state = "S";
  t.wchan = "futex_wait_queue";
  StackFrame native;
  native.function = "std::vector<int, std::allocator<int> >::push_back(int const&)";
  native.module = "/usr/lib/libfoo.so";
  native.pc = 0x7f0011223344ULL;
  native.offset = 0x3344;
  native.file = "foo.cc";
  native.line = 10;
  StackFrame py;
  py.kind = FrameKind::kPython;
  py.function = "<module>";
  py.file = "train.py";
  py.line = 215;
  t.frames = {native, py};
  t.native_frames = {native};
  t.python_frames = {py};
  t.merge_note = "native unwind ended early";
  return t;
}

// What simgpu's reader writes, the channel's graph included.
inline RingProgress richSimRecord() {
  RingProgress r;
  r.comm = "57a76bac89a0c4ad";
  r.nccl_comm = "0c1e5a1f7d2b9e44";
  r.op = "ncclAllReduce";
  r.seq = 18446744073709551615ULL;
  r.channel = 1;
  r.rank = 3;
  r.prev = 2;
  r.next = 0;
  RingConnection c;
  c.peer = 2;
  c.target_step = 124;
  c.observed_step = 123;
  c.waiting = true;
  c.base_step = 100;
  r.recv = c;
  // The channel's graph: a tree rank's parent (both ways) and a child.
  RingConnection parent_send;
  parent_send.peer = 0;
  parent_send.target_step = 93;
  parent_send.observed_step = 92;
  parent_send.posted_step = 100;
  parent_send.base_step = 92;
  parent_send.direction = "send";
  parent_send.role = "tree-parent";
  RingConnection child_recv = c;
  child_recv.direction = "recv";
  child_recv.role = "tree-child";
  r.connections = {parent_send, child_recv};
  r.comm_rank = 3;
  r.comm_size = 4;
  r.algorithm = "RING";
  r.protocol = "SIMPLE";
  r.source = "sim-frame";
  r.stalled = true;
  r.mismatch = RingMismatch{11, "ncclBroadcast"};
  r.waiting_threads.push_back({78, "simnccl-ch1", "simnccl_wait_peer", "recv"});
  return r;
}

inline RingProgress richHostRecord() {
  // What the cuda backend's host reader writes: values it could not see are null.
  RingProgress host;
  host.nccl_comm = "2f6c1a0e9b7d4c31";
  host.seq_known = false;
  host.channel = 5;
  host.rank = 1;
  host.prev = 0;
  host.next = -1;
  RingConnection net;
  net.peer = 0;
  net.target_known = false;
  net.observed_step = 96;
  net.base_step = 88;
  net.transport = "NET";
  net.counter_memory = "host";
  net.proxy = RingProxyProgress{88, 16, 8, 6, 4, 2};
  net.nic = RingNic{3, "mlx5_3", 1};
  host.recv = net;
  RingConnection p2p;
  p2p.peer = 2;
  p2p.target_known = p2p.observed_known = false;
  p2p.transport = "P2P";
  host.send = p2p;
  host.source = "nccl-host";
  host.nccl_op_count = 41;
  return host;
}

inline ForensicsDump richDump() {
  ForensicsDump d;
  d.rank = 12;
  d.pid = 4242;
  d.host = "node\"07\"";
  d.exe = "/usr/bin/python3";
  d.cmdline = {"python3", "train.py", "--tab\there", "caf\xc3\xa9 \xf0\x9f\x98\x80"};
  d.process_state = "S (sleeping)";
  d.time_unix_s = 1795266293.2491817;
  d.backend_requested = "auto";
  d.backend = "sim";
  d.unwinder = "libdwfl";
  d.debugger = "/usr/bin/gdb";
  d.python_version = "3.11.2";
  d.errors = {"debugger: timed out\nafter 30 s"};
  d.target_exited_during = "debugger";
  RasStatus ras;
  ras.address = "localhost:28028";
  ras.asked_by = "collector";
  ras.time_unix_s = 1700000000.25;
  ras.seconds = 5.125;
  RasComm comm;
  comm.hash = "0x9a3f00c2e1d47b05";
  comm.size = 3;
  comm.ranks = {{0, "node-a", 101, 0, false, false}, {1, "node-a", 102, 1, false, false}};
  comm.missing = {{2, "node-b", 203, 0, true, true}};
  ras.communicators = {comm, RasComm{"0x1", 1, {{0, "node-a", 101, 0, false, false}}, {}}};
  d.ras = ras;
  d.threads = {richThread(), ThreadStack{}};
  d.ring_progress = {richSimRecord(), richHostRecord()};
  d.phases = {{"unwind", 0.25, true, ""}, {"debugger", 30.0, false, "timed out"}};
  return d;
}

inline WatchdogSnapshot richSnapshot() {
  WatchdogSnapshot s;
  s.time_unix_s = 1795266000.05;
  s.timeout_s = 300;
  s.detected_here = true;
  s.identity.rank = 7;
  s.identity.local_rank = 3;
  s.identity.world_size = 16;
  s.identity.rank_source = "RANK";
  s.identity.host = "node\"01\"";
  s.identity.pid = 4242;
  s.identity.job_id = "job\t1";
  s.identity.device = 3;
  s.identity.cuda_visible_devices = "0,1,2,3";
  TriggerRecord t;
  t.rank = 1;
  t.host = "node00";
  t.pid = 99;
  t.time_unix_s = 1795265999.5;
  t.reason = "timeout";
  t.stuck_op = StuckOp{"ncclAllReduce", "00000000deadbeef", 10, 4096, std::nullopt, "0x10", 3.5};
  s.trigger = t;
  s.comms.push_back({"00000000deadbeef", 7, 16, 3, "live", 10, 9, "1852e9190e780d2a", "0x55d0c0a01000",
                     {{9, "ncclAllReduce", 262144, "float32", std::nullopt}, {10, "ncclBroadcast", 16, "int64", 0}},
                     {{6, 40, 39}, {8, 0, 40}},
                     3,
                     "ncclRemoteError"});
  s.comms.push_back({"0000000000000001", 0, 2, 3, "destroyed", std::nullopt, std::nullopt, "", "0x55d0c0a02000", {}, {}, 0, ""});
  SnapshotStream st;
  st.stream = "0x10";
  st.device = 3;
  st.pending.push_back({"ncclAllReduce", "collective", "00000000deadbeef", 10, 4096, "float32", 1024, std::nullopt,
                        3.5, 3.6, true, std::nullopt});
  st.pending.push_back(
      {"ncclSend", "p2p", "00000000deadbeef", std::nullopt, 64, "uint8", 64, 3, 0, 3.4, false, std::nullopt});
  s.streams.push_back(st);
  s.streams.push_back({"0x20", std::nullopt, {}});
  s.host_calls.push_back({"ncclGroupEnd", 4243, "python", 4.0, "00000000deadbeef", 11, std::nullopt});
  s.host_calls.push_back({"ncclCommInitRank", 4244, "python", 5.0, "", std::nullopt,
                          SnapshotJoining{"00000000cafef00d", 3, 8}});
  s.unique_ids_made = {"00000000cafef00d", "00000000feedface"};
  s.health = {1, 100, 98, 2, 5};
  SnapshotProgress p;
  p.plugin_inits = 2;
  SnapshotProxyConnection c;
  c.nccl_comm = "1852e9190e780d2a";
  c.rank = 7;
  c.nranks = 16;
  c.channel = 1;
  c.peer = 8;
  c.dir = "recv";
  c.ops = 4;
  c.ops_done = 3;
  c.steps = {32, 30, 30, 29};
  c.moved_s_ago = {std::optional<double>(1.5), std::nullopt, 2.0, 2.25};
  p.connections.push_back(c);
  c.dir = "send";
  c.peer = 6;
  c.untracked_ops = 2;
  p.connections.push_back(c);
  p.kernel_channels.push_back({"1852e9190e780d2a", 1, 4, 3, 1.5, std::nullopt});
  p.algorithms.push_back({"1852e9190e780d2a", "RING", 812, 2.5});
  p.algorithms.push_back({"1852e9190e780d2a", "TREE", 40, std::nullopt});
  p.dropped_connections = 1;
  p.dropped_comms = 2;
  s.progress = p;
  SnapshotNcclLog log;
  log.file = "/var/tmp/hangwatch-fallback/nccl-info/nccl.node\"01\".4242.log";
  log.lines = {"node01:4242:4250 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
               "node01:4242:4251 [3] NCCL INFO Channel 02/0 : 7[3] -> 8[0] [send] via NET/IB/3/GDRDMA"};
  log.lines_dropped = 1;
  log.truncated = true;
  s.nccl_log = log;
  return s;
}

}  // namespace test
