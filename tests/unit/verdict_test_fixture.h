#pragma once
// Synthetic job directories for the verdict tests: each rank's snapshot and forensics dump
// built as the watchdog and the collector write them, for a chosen kind of hang.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/trigger_record.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace verdict_test {

using namespace hangwatch;

inline const std::string kComm = "c0ffee00c0ffee00";

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/verdict-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

inline ThreadStack thread(int64_t tid, const std::string& name, std::vector<std::string> functions_innermost_first) {
  ThreadStack t;
  t.tid = tid;
  t.name = name;
  for (const std::string& f : functions_innermost_first) {
    StackFrame fr;
    fr.function = f;
    t.frames.push_back(fr);
  }
  return t;
}

// A rank of a job on one world communicator; by default waiting in ncclAllReduce seq `seq`.
struct FakeRank {
  WatchdogSnapshot snap;
  ForensicsDump dump;

  FakeRank(int rank, int world, uint64_t seq, const std::string& job_id = "job1") {
    snap.time_unix_s = 1000.5;
    snap.timeout_s = 3;
    snap.identity.rank = rank;
    snap.identity.world_size = world;
    snap.identity.host = "node" + std::to_string(rank / 4);
    snap.identity.device = rank % 4;
    snap.identity.pid = 100 + rank;
    snap.identity.job_id = job_id;
    SnapshotComm c;
    c.hash = kComm;
    c.rank = rank;
    c.size = world;
    c.last_issued_seq = seq;
    c.last_completed_seq = seq - 1;
    snap.comms.push_back(c);
    SnapshotStream st;
    st.stream = "0x1";
    SnapshotPendingOp op;
    op.op = "ncclAllReduce";
    op.op_class = "collective";
    op.comm = kComm;
    op.seq = seq;
    op.count = 262144;
    op.dtype = "float32";
    op.age_s = 4;
    st.pending.push_back(op);
    snap.streams.push_back(st);
    dump.rank = rank;
    dump.pid = 100 + rank;
    dump.host = snap.identity.host;
    dump.threads.push_back(thread(100 + rank, "ring_train", {"simcuda_stream_wait", "cudaStreamSynchronize", "train_step", "main"}));
    dump.threads.push_back(thread(200 + rank, "simnccl-ch0", {"simnccl_wait_peer", "simnccl_channel_main"}));
  }

  // What the rank recorded issuing on the communicator (comms[0].recent): seqs `from`..`to`
  // as `op` of `count` float32, replacing any earlier record of those positions.
  void issued(uint64_t from, uint64_t to, uint64_t count, const std::string& op = "ncclAllReduce") {
    std::vector<SnapshotIssuedOp>& recent = snap.comms[0].recent;
    std::erase_if(recent, [&](const SnapshotIssuedOp& r) { return r.seq >= from && r.seq <= to; });
    for (uint64_t q = from; q <= to; ++q) recent.push_back({q, op, count, "float32", std::nullopt});
    std::sort(recent.begin(), recent.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
    while (recent.size() > SnapshotComm::kRecentKept) recent.erase(recent.begin());
  }

  // Finished the collective the others wait in and went on: issued up to `last_issued`, the
  // oldest pending one now `waiting_in`.
  void wentOn(uint64_t last_issued, uint64_t waiting_in) {
    snap.comms[0].last_issued_seq = last_issued;
    snap.comms[0].last_completed_seq = waiting_in - 1;
    snap.streams[0].pending[0].seq = waiting_in;
  }

  // Not in the collective: issued up to seq-1, nothing pending, the main thread elsewhere.
  void notInCollective(uint64_t seq, std::vector<std::string> where) {
    snap.comms[0].last_issued_seq = seq - 1;
    snap.comms[0].last_completed_seq = seq - 1;
    snap.streams.clear();
    dump.threads[0] = thread(dump.pid, "ring_train", std::move(where));
    dump.threads.pop_back();
  }

  // Inside ncclCommInitRank for a communicator (hash `forming`) of `size`, as `comm_rank`: no
  // communicator made yet, nothing on the streams.
  void insideInit(const std::string& forming, int comm_rank, int size) {
    snap.comms.clear();
    snap.streams.clear();
    SnapshotHostCall h;
    h.call = "ncclCommInitRank";
    h.tid = dump.pid;
    h.age_s = 3.5;
    h.joining = SnapshotJoining{forming, comm_rank, size};
    snap.host_calls.push_back(h);
    dump.threads[0] = thread(dump.pid, "ring_train", {"bootstrapInit", "ncclCommInitRank", "joinWorld", "main"});
    dump.threads.pop_back();
  }

  static RingConnection connection(int peer, uint64_t target, uint64_t observed) {
    RingConnection c;
    c.peer = peer;
    c.target_step = target;
    c.observed_step = observed;
    c.waiting = true;
    return c;
  }

  void ring(int channel, int world, std::optional<uint64_t> recv_observed, std::optional<uint64_t> send_observed,
            uint64_t seq) {
    RingProgress r;
    r.comm = kComm;
    r.op = "ncclAllReduce";
    r.seq = seq;
    r.channel = channel;
    r.rank = *dump.rank;
    r.prev = (r.rank + world - 1) % world;
    r.next = (r.rank + 1) % world;
    if (recv_observed) r.recv = connection(r.prev, *recv_observed + 1, *recv_observed);
    if (send_observed) r.send = connection(r.next, *send_observed + 8, *send_observed);
    dump.ring_progress.push_back(r);
  }

  void write(const std::string& job_dir) const {
    int r = *snap.identity.rank;
    (void)writeFileAtomically(watchdogSnapshotPath(job_dir, r), toJson(snap).dump());
    (void)writeFileAtomically(forensicsDumpPath(job_dir, r), toJson(dump).dump());
  }
};

inline void writeTrigger(const std::string& job_dir, int rank, uint64_t seq, double time = 1000.0) {
  TriggerRecord t;
  t.rank = rank;
  t.host = "node0";
  t.pid = 100 + rank;
  t.time_unix_s = time;
  t.reason = "timeout";
  StuckOp s;
  s.op = "ncclAllReduce";
  s.comm = kComm;
  s.seq = seq;
  s.age_s = 3.2;
  t.stuck_op = s;
  (void)writeFileAtomically(triggerPath(job_dir), toJson(t).dump());
}

// A ring where every connection moved on except those the caller slows: `delivered(X)` and
// `consumed(X)` give connection X->X+1's progress as each end sees it.
template <typename Delivered, typename Consumed>
std::vector<FakeRank> ringJob(int world, uint64_t seq, int channels, Delivered delivered, Consumed consumed,
                              std::vector<int> silent = {}) {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back(r, world, seq);
    if (std::find(silent.begin(), silent.end(), r) != silent.end()) continue;
    for (int ch = 0; ch < channels; ++ch) {
      int prev = (r + world - 1) % world;
      ranks.back().ring(ch, world, delivered(prev, ch), consumed(r, ch), seq);
    }
  }
  return ranks;
}

}  // namespace verdict_test
