// What simnccl tells an NCCL profiler plugin, checked against NCCL 2.28's own rules
// (src/plugin/profiler.cc, src/transport/net.cc, src/transport/profiler.cc): ranks are
// grouped into nodes; only connections between nodes (NET) report ProxyOp/ProxyStep
// events, on both ends, with NCCL's state sequences; Coll/P2p events are their parents;
// KernelCh events mark each channel of each kernel. The plugin is
// fixtures/call_log_profiler.cc, which logs every call it gets.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "hangwatch/common/nccl_profiler_v5.h"
#include "multi_rank.h"
#include "profiler_call_log.h"

namespace {

namespace np = hangwatch::nccl_profiler;

constexpr int kRanks = 4;
constexpr int kChannels = 2;
constexpr size_t kSlotBytes = 65536;
constexpr size_t kProfiledCount = 200000;  // floats: two ring rounds of 4 x 16384 per channel
constexpr int kAll = static_cast<int>(np::kColl | np::kP2p | np::kProxyOp | np::kProxyStep | np::kKernelCh);

const std::vector<int> kSendStates = {np::kProxyStepSendGPUWait, np::kProxyStepSendPeerWait, np::kProxyStepSendWait};
const std::vector<int> kRecvStates = {np::kProxyStepRecvWait, np::kProxyStepRecvFlushWait, np::kProxyStepRecvGPUWait};

class LogDir {
 public:
  LogDir() {
    char tmpl[] = "/tmp/simnccl-profiler-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~LogDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every rank's environment: the logging plugin, the emulator's shape, and no node or
// launcher settings inherited from the caller unless the test names them. The ring unless
// the test names another algorithm: most tests here follow NCCL's ring across nodes, where
// NCCL's cost model would take the tree for these sizes.
std::map<std::string, std::string> profilerEnv(const LogDir& dir, int mask,
                                               std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> env = {
      {"NCCL_PROFILER_PLUGIN", CALL_LOG_PROFILER_LIBRARY},
      {"CALL_LOG_PROFILER_DIR", dir.path()},
      {"CALL_LOG_PROFILER_MASK", std::to_string(mask)},
      {"SIMGPU_NCHANNELS", std::to_string(kChannels)},
      {"SIMGPU_SLOT_BYTES", std::to_string(kSlotBytes)},
      {"SIMGPU_FAULTS", ""},
      {"NCCL_ALGO", "Ring"},
      {"NCCL_PAT_ENABLE", ""},
      {"SIMGPU_RANKS_PER_NODE", ""},
      {"SIMGPU_HOSTID", ""},
      {"NCCL_HOSTID", ""},
      {"RANK", ""},
      {"OMPI_COMM_WORLD_RANK", ""},
      {"SLURM_PROCID", ""},
      {"PMI_RANK", ""},
  };
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

// Each rank runs `collective` `ops` times on the default stream, waiting for each, and
// reports completed ones on the board; it aborts its communicator when the test asks.
int collectiveLoop(int rank, int nranks, const ncclUniqueId& id, int ops, testing::RankBoard& board,
                   const std::function<ncclResult_t(ncclComm_t, std::vector<float>&, int op)>& collective) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
  std::thread aborter([&] {
    while (!board.abort_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ncclCommAbort(comm);
  });
  std::vector<float> buf(kProfiledCount * nranks, 1.0f);
  for (int op = 0; op < ops && !board.abort_requested.load(); ++op) {
    if (collective(comm, buf, op) != ncclSuccess) break;
    cudaStreamSynchronize(nullptr);
    if (board.abort_requested.load()) break;
    board.progress[rank].store(op + 1);
  }
  aborter.join();
  return 0;
}

ncclResult_t allReduce(ncclComm_t comm, std::vector<float>& buf, int) {
  return ncclAllReduce(buf.data(), buf.data(), kProfiledCount, ncclFloat32, ncclSum, comm, nullptr);
}

// Runs `ops` collectives on every rank to completion; returns each rank's log.
std::map<int, testing::ProcessLog> runJob(const std::map<std::string, std::string>& env, int ops,
                                          const LogDir& dir,
                                          const std::function<ncclResult_t(ncclComm_t, std::vector<float>&, int)>& coll,
                                          const std::function<void(int)>& per_rank_setup = nullptr) {
  testing::MultiRankJob job(kRanks);
  ncclUniqueId id = job.id();
  job.start(
      [&](int rank) {
        if (per_rank_setup) per_rank_setup(rank);
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return 100;
        std::vector<float> buf(kProfiledCount * kRanks, 1.0f);
        for (int op = 0; op < ops; ++op) {
          if (coll(comm, buf, op) != ncclSuccess) return 101;
          if (cudaStreamSynchronize(nullptr) != cudaSuccess) return 102;
        }
        ncclCommDestroy(comm);
        return 0;
      },
      env);
  REQUIRE(testing::allZero(job.wait()));
  return testing::readCallLogs(dir.path());
}

// Starts a looping job, waits until it hangs, releases it, and returns each rank's log.
std::map<int, testing::ProcessLog> hangJob(const std::map<std::string, std::string>& env, int ops,
                                           const LogDir& dir) {
  testing::MultiRankJob job(kRanks);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start([&](int rank) { return collectiveLoop(rank, kRanks, id, ops, board, allReduce); }, env);
  job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  board.abort_requested.store(1);
  INFO("abort must release every blocked rank");
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
  return testing::readCallLogs(dir.path());
}

// Four ranks, two a node (the ring's links 1 -> 2 and 3 -> 0 are NET), hung by `faults`.
std::map<int, testing::ProcessLog> twoNodesHungBy(const std::string& faults, const LogDir& dir) {
  auto logs = hangJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "2"}, {"SIMGPU_FAULTS", faults}}), 4, dir);
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  return logs;
}

int ringNext(int r) { return (r + 1) % kRanks; }
int ringPrev(int r) { return (r + kRanks - 1) % kRanks; }

// The ring AllReduce's steps on one channel: 2(n-1) per round of n chunks of one slot.
int allReduceSteps(int channel) {
  const size_t share = kProfiledCount * (channel + 1) / kChannels - kProfiledCount * channel / kChannels;
  const size_t chunk = kSlotBytes / sizeof(float);
  const size_t rounds = (share + kRanks * chunk - 1) / (kRanks * chunk);
  return static_cast<int>(2 * (kRanks - 1) * rounds);
}

const testing::LoggedEvent* collWithSeq(const testing::ProcessLog& log, const std::string& func, long seq) {
  for (const auto* c : log.ofType("Coll"))
    if (c->str("func") == func && c->num("seq") == seq) return c;
  return nullptr;
}

// The ProxyOps of `task` in one direction, by channel.
std::map<long, const testing::LoggedEvent*> proxyOpsOf(const testing::ProcessLog& log,
                                                       const testing::LoggedEvent& task, bool send) {
  std::map<long, const testing::LoggedEvent*> ops;
  for (const auto* op : log.childrenOf(task, "ProxyOp"))
    if (op->num("send") == (send ? 1 : 0)) ops[op->num("ch")] = op;
  return ops;
}

// The ProxyOps of AllReduce `seq` on the connection from -> to, by channel: the sender's
// sends and the receiver's receives, one of each per channel.
using OpsByChannel = std::map<long, const testing::LoggedEvent*>;
std::pair<OpsByChannel, OpsByChannel> linkOps(const std::map<int, testing::ProcessLog>& logs, int from, int to,
                                              long seq) {
  const auto* sender_task = collWithSeq(logs.at(from), "AllReduce", seq);
  const auto* receiver_task = collWithSeq(logs.at(to), "AllReduce", seq);
  REQUIRE(sender_task != nullptr);
  REQUIRE(receiver_task != nullptr);
  auto sends = proxyOpsOf(logs.at(from), *sender_task, true);
  auto recvs = proxyOpsOf(logs.at(to), *receiver_task, false);
  REQUIRE(sends.size() == static_cast<size_t>(kChannels));
  REQUIRE(recvs.size() == static_cast<size_t>(kChannels));
  return {sends, recvs};
}

// NCCL keeps at most NCCL_STEPS steps of an operation posted and not completed.
int mostStepsInFlight(const std::vector<const testing::LoggedEvent*>& steps) {
  int most = 0;
  for (const auto* s : steps) {
    int open = 0;
    for (const auto* o : steps)
      if (o->start_line <= s->start_line && (!o->stopped || o->stop_line > s->start_line)) ++open;
    most = std::max(most, open);
  }
  return most;
}

// A completed ProxyOp: nSteps steps 0..n-1 with `states` each, all stopped, then the op.
void checkCompletedProxyOp(const testing::ProcessLog& log, const testing::LoggedEvent& op,
                           const std::vector<int>& states) {
  auto steps = log.childrenOf(op, "ProxyStep");
  CHECK(static_cast<long>(steps.size()) == op.num("nsteps"));
  CHECK(op.num("chunk") == static_cast<long>(kSlotBytes));
  CHECK(op.num("pid") == log.pid);
  CHECK(op.states == std::vector<int>{np::kProxyOpInProgress});
  CHECK(op.stopped);
  std::set<long> ids;
  for (const auto* s : steps) {
    ids.insert(s->num("step"));
    CHECK(s->states == states);
    CHECK(s->stopped);
    CHECK(s->stop_line < op.stop_line);
    CHECK(s->num("rank") == log.rank());
  }
  CHECK(ids.size() == steps.size());
  CHECK((ids.empty() || (*ids.begin() == 0 && *ids.rbegin() == static_cast<long>(steps.size()) - 1)));
  CHECK(mostStepsInFlight(steps) <= 8);
}

// Bytes the steps carried, from the state that tells them (SendWait, RecvFlushWait).
uint64_t bytesCarried(const testing::ProcessLog& log, const testing::LoggedEvent& op, int state) {
  uint64_t bytes = 0;
  for (const auto* s : log.childrenOf(op, "ProxyStep"))
    for (size_t i = 0; i < s->states.size(); ++i)
      if (s->states[i] == state) bytes += s->state_args[i];
  return bytes;
}

void checkKernelChannels(const testing::ProcessLog& log, const testing::LoggedEvent& task, int channels) {
  auto kernels = log.childrenOf(task, "KernelCh");
  REQUIRE(static_cast<int>(kernels.size()) == channels);
  std::set<long> ids;
  for (const auto* k : kernels) {
    ids.insert(k->num("ch"));
    CHECK(k->states == std::vector<int>{np::kKernelChStop});
    CHECK(k->stopped);
    CHECK(k->state_args.at(0) >= static_cast<uint64_t>(std::stoull(k->str("ptimer"))));
  }
  CHECK(static_cast<int>(ids.size()) == channels);
}

}  // namespace

TEST_CASE("RanksOnOneNodeReportCollsAndKernelChannelsButNoProxyEvents") {
  LogDir dir;
  // AllReduce, AllGather, AllReduce: NCCL numbers collectives per function.
  auto logs = runJob(profilerEnv(dir, kAll), 3, dir, [](ncclComm_t comm, std::vector<float>& buf, int op) {
    int rank = 0;
    ncclCommUserRank(comm, &rank);
    if (op == 1) return ncclAllGather(buf.data() + rank * kProfiledCount, buf.data(), kProfiledCount, ncclFloat32, comm, nullptr);
    return allReduce(comm, buf, op);
  });
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    CHECK(log.init.at("nodes") == "1");
    CHECK(log.finalizes == 1);
    CHECK(log.ofType("ProxyOp").empty());
    CHECK(log.ofType("ProxyStep").empty());
    REQUIRE(log.ofType("Coll").size() == 3);
    for (const auto& [func, seq] : std::vector<std::pair<std::string, long>>{{"AllReduce", 0}, {"AllGather", 0},
                                                                              {"AllReduce", 1}}) {
      const auto* coll = collWithSeq(log, func, seq);
      REQUIRE(coll != nullptr);
      CHECK(coll->num("rank") == rank);
      CHECK(coll->str("algo") == "RING");
      CHECK(coll->str("proto") == "SIMPLE");
      CHECK(coll->str("dtype") == "ncclFloat32");
      CHECK(coll->num("count") == static_cast<long>(kProfiledCount));
      CHECK(coll->num("nch") == kChannels);
      // src/plugin/profiler.cc: the parent is the call's CollApi event, parentGroup the kernel's Group.
      const auto* api = log.byHandle(coll->parent);
      REQUIRE(api != nullptr);
      CHECK(api->type == "CollApi");
      CHECK(api->str("func") == func);
      const auto* group = log.byHandle(std::stoull(coll->str("group")));
      REQUIRE(group != nullptr);
      CHECK(group->type == "Group");
      CHECK(coll->stopped);
      checkKernelChannels(log, *coll, kChannels);
    }
  }
}

TEST_CASE("TwoNodesReportSendAndRecvProxyOpsOnlyOnTheConnectionsBetweenThem") {
  LogDir dir;
  constexpr int kOps = 2;
  auto logs = runJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "2"}}), kOps, dir, allReduce);
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  auto node = [](int r) { return r / 2; };  // no launcher: communicator ranks, 2 per node
  std::set<std::string> comm_ids;
  std::map<std::tuple<int, int, long>, uint64_t> sent, received;  // (from, to, seq*16+channel) -> bytes
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    comm_ids.insert(log.init.at("comm"));
    CHECK(log.init.at("nodes") == "2");
    CHECK(log.init.at("nranks") == std::to_string(kRanks));
    const bool net_send = node(rank) != node(ringNext(rank));
    const bool net_recv = node(ringPrev(rank)) != node(rank);
    size_t ops_seen = 0;
    for (long seq = 0; seq < kOps; ++seq) {
      const auto* coll = collWithSeq(log, "AllReduce", seq);
      REQUIRE(coll != nullptr);
      checkKernelChannels(log, *coll, kChannels);
      auto sends = proxyOpsOf(log, *coll, true);
      auto recvs = proxyOpsOf(log, *coll, false);
      CHECK(sends.size() == (net_send ? static_cast<size_t>(kChannels) : 0u));
      CHECK(recvs.size() == (net_recv ? static_cast<size_t>(kChannels) : 0u));
      for (const auto& [ch, op] : sends) {
        CHECK(op->num("peer") == ringNext(rank));
        CHECK(op->num("nsteps") == allReduceSteps(static_cast<int>(ch)));
        checkCompletedProxyOp(log, *op, kSendStates);
        sent[{rank, ringNext(rank), seq * 16 + ch}] = bytesCarried(log, *op, np::kProxyStepSendWait);
      }
      for (const auto& [ch, op] : recvs) {
        CHECK(op->num("peer") == ringPrev(rank));
        CHECK(op->num("nsteps") == allReduceSteps(static_cast<int>(ch)));
        checkCompletedProxyOp(log, *op, kRecvStates);
        received[{ringPrev(rank), rank, seq * 16 + ch}] = bytesCarried(log, *op, np::kProxyStepRecvFlushWait);
      }
      ops_seen += sends.size() + recvs.size();
    }
    CHECK(log.ofType("ProxyOp").size() == ops_seen);  // none outside the collectives' tasks
  }
  CHECK(comm_ids.size() == 1);
  // What one end handed to the network is what the other end received.
  CHECK(sent.size() == 2u * kOps * kChannels);
  CHECK(sent == received);
  for (const auto& [key, bytes] : sent) CHECK(bytes > 0);
}

TEST_CASE("PointToPointBetweenNodesReportsProxyOpsUnderItsP2pEvent") {
  LogDir dir;
  constexpr size_t kFloats = 100000;  // 400 KB: seven steps of 64 KiB
  auto logs = runJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "2"}}), 1, dir,
                     [](ncclComm_t comm, std::vector<float>& buf, int) {
                       int rank = 0;
                       ncclCommUserRank(comm, &rank);
                       ncclGroupStart();
                       if (rank == 0) {
                         ncclSend(buf.data(), kFloats, ncclFloat32, 1, comm, nullptr);  // inside node 0
                         ncclSend(buf.data(), kFloats, ncclFloat32, 2, comm, nullptr);  // node 0 -> node 1
                       } else if (rank == 1 || rank == 2) {
                         ncclRecv(buf.data(), kFloats, ncclFloat32, 0, comm, nullptr);
                       }
                       return ncclGroupEnd();
                     });
  const long steps = static_cast<long>((kFloats * sizeof(float) + kSlotBytes - 1) / kSlotBytes);
  auto p2pTo = [](const testing::ProcessLog& log, const std::string& func, int peer) {
    for (const auto* p : log.ofType("P2p"))
      if (p->str("func") == func && p->num("peer") == peer) return p;
    return static_cast<const testing::LoggedEvent*>(nullptr);
  };
  const auto* to_local = p2pTo(logs.at(0), "Send", 1);
  const auto* to_remote = p2pTo(logs.at(0), "Send", 2);
  const auto* from_local = p2pTo(logs.at(1), "Recv", 0);
  const auto* from_remote = p2pTo(logs.at(2), "Recv", 0);
  REQUIRE(to_local != nullptr);
  REQUIRE(to_remote != nullptr);
  REQUIRE(from_local != nullptr);
  REQUIRE(from_remote != nullptr);
  CHECK(to_remote->num("count") == static_cast<long>(kFloats));
  CHECK(logs.at(0).childrenOf(*to_local, "ProxyOp").empty());
  CHECK(logs.at(1).ofType("ProxyOp").empty());
  auto send_ops = logs.at(0).childrenOf(*to_remote, "ProxyOp");
  auto recv_ops = logs.at(2).childrenOf(*from_remote, "ProxyOp");
  REQUIRE(send_ops.size() == 1);
  REQUIRE(recv_ops.size() == 1);
  CHECK(send_ops[0]->num("peer") == 2);
  CHECK(send_ops[0]->num("send") == 1);
  CHECK(send_ops[0]->num("nsteps") == steps);
  checkCompletedProxyOp(logs.at(0), *send_ops[0], kSendStates);
  CHECK(recv_ops[0]->num("peer") == 0);
  CHECK(recv_ops[0]->num("send") == 0);
  CHECK(recv_ops[0]->num("nsteps") == steps);
  checkCompletedProxyOp(logs.at(2), *recv_ops[0], kRecvStates);
  CHECK(bytesCarried(logs.at(0), *send_ops[0], np::kProxyStepSendWait) == kFloats * sizeof(float));
  CHECK(bytesCarried(logs.at(2), *recv_ops[0], np::kProxyStepRecvFlushWait) == kFloats * sizeof(float));
  for (const auto* p : {to_local, to_remote}) checkKernelChannels(logs.at(0), *p, 1);
}

TEST_CASE("InitGetsTheNodeCountAndOneCommIdAndHostIdsDecideTheNodes") {
  LogDir dir;
  // SIMGPU_HOSTID per process wins over SIMGPU_RANKS_PER_NODE: nodes {0,1,3} and {2}.
  const std::vector<std::string> host = {"a", "a", "b", "a"};
  auto logs = runJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "1"}}), 1, dir, allReduce,
                     [&](int rank) { setenv("SIMGPU_HOSTID", host[rank].c_str(), 1); });
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  std::set<std::string> ids;
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    ids.insert(log.init.at("comm"));
    CHECK(log.inits == 1);
    CHECK(log.init.at("nodes") == "2");
    CHECK(log.init.at("rank") == std::to_string(rank));
    CHECK(log.init.at("nranks") == std::to_string(kRanks));
    std::set<std::pair<long, long>> links;  // (send?, peer)
    for (const auto* op : log.ofType("ProxyOp")) links.insert({op->num("send"), op->num("peer")});
    std::set<std::pair<long, long>> expected;
    if (host[rank] != host[ringNext(rank)]) expected.insert({1, ringNext(rank)});
    if (host[ringPrev(rank)] != host[rank]) expected.insert({0, ringPrev(rank)});
    CHECK(links == expected);
  }
  CHECK(ids.size() == 1);
}

TEST_CASE("RanksPerNodeCountsLauncherRanks") {
  LogDir dir;
  // Launcher rank = comm rank + 1: nodes of 2 launcher ranks are comm ranks {3,0} and {1,2}.
  auto logs = runJob(profilerEnv(dir, static_cast<int>(np::kProxyOp), {{"SIMGPU_RANKS_PER_NODE", "2"}}), 1, dir,
                     allReduce, [](int rank) { setenv("RANK", std::to_string((rank + 1) % kRanks).c_str(), 1); });
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  auto node = [](int r) { return ((r + 1) % kRanks) / 2; };
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    std::set<std::pair<long, long>> links, expected;
    for (const auto* op : log.ofType("ProxyOp")) links.insert({op->num("send"), op->num("peer")});
    if (node(rank) != node(ringNext(rank))) expected.insert({1, ringNext(rank)});
    if (node(ringPrev(rank)) != node(rank)) expected.insert({0, ringPrev(rank)});
    CHECK(links == expected);
    CHECK(log.ofType("ProxyStep").empty());  // ProxyOp alone does not ask for steps
  }
}

TEST_CASE("MalformedRanksPerNodeFailsInitNamingTheVariable") {
  for (const char* value : {"0", "two", "-1"}) {
    testing::MultiRankJob job(1);
    ncclUniqueId id = job.id();
    job.start(
        [&](int) {
          ncclComm_t comm;
          if (ncclCommInitRank(&comm, 1, id, 0) != ncclInvalidArgument) return 1;
          return std::string(ncclGetLastError(nullptr)).find("SIMGPU_RANKS_PER_NODE") != std::string::npos ? 0 : 2;
        },
        {{"SIMGPU_RANKS_PER_NODE", value}, {"SIMGPU_HOSTID", ""}});
    INFO(value);
    CHECK(testing::allZero(job.wait()));
  }
}

TEST_CASE("WhatIsReportedFollowsThePluginsMask") {
  const std::map<std::string, std::string> every_rank_a_node = {{"SIMGPU_RANKS_PER_NODE", "1"}};
  SECTION("Coll only: its API parents and the Group, no proxy or kernel events") {
    LogDir dir;
    auto logs = runJob(profilerEnv(dir, static_cast<int>(np::kColl), every_rank_a_node), 1, dir, allReduce);
    for (const auto& [rank, log] : logs) {
      std::vector<std::string> types;
      for (const auto& e : log.events) types.push_back(e.type);
      CHECK(types == std::vector<std::string>{"GroupApi", "CollApi", "Group", "Coll"});
    }
  }
  SECTION("KernelLaunch only: it and its GroupApi parent") {
    LogDir dir;
    auto logs = runJob(profilerEnv(dir, static_cast<int>(np::kKernelLaunch), every_rank_a_node), 1, dir, allReduce);
    for (const auto& [rank, log] : logs) {
      std::vector<std::string> types;
      for (const auto& e : log.events) types.push_back(e.type);
      CHECK(types == std::vector<std::string>{"GroupApi", "KernelLaunch"});
      CHECK(log.events.at(1).parent == log.events.at(0).handle);
    }
  }
  SECTION("ProxyStep: Colls are started as parents, ProxyOps and steps follow") {
    LogDir dir;
    auto logs = runJob(profilerEnv(dir, static_cast<int>(np::kProxyStep), every_rank_a_node), 1, dir, allReduce);
    for (const auto& [rank, log] : logs) {
      const auto* coll = collWithSeq(log, "AllReduce", 0);
      REQUIRE(coll != nullptr);
      CHECK(log.childrenOf(*coll, "ProxyOp").size() == 2u * kChannels);
      CHECK(log.ofType("KernelCh").empty());
      CHECK(!log.ofType("ProxyStep").empty());
    }
  }
  SECTION("Nothing asked: init and finalize only") {
    LogDir dir;
    auto logs = runJob(profilerEnv(dir, 0, every_rank_a_node), 1, dir, allReduce);
    REQUIRE(logs.size() == static_cast<size_t>(kRanks));
    for (const auto& [rank, log] : logs) {
      CHECK(log.events.empty());
      CHECK(log.finalizes == 1);
    }
  }
}

TEST_CASE("DeadLinkLeavesTheSendersStepsOnTheNetworkAndTheReceiversWaitingForData") {
  LogDir dir;
  auto logs = twoNodesHungBy("dead-link=1->2@op=1", dir);
  const auto& sender = logs.at(1);
  const auto& receiver = logs.at(2);
  // The first collective went through.
  for (const auto& [rank, log] : {std::pair{1, &sender}, std::pair{2, &receiver}}) {
    INFO("rank " << rank);
    const auto* first = collWithSeq(*log, "AllReduce", 0);
    REQUIRE(first != nullptr);
    for (const auto& [ch, op] : proxyOpsOf(*log, *first, rank == 1))
      checkCompletedProxyOp(*log, *op, rank == 1 ? kSendStates : kRecvStates);
  }
  auto [sends, recvs] = linkOps(logs, 1, 2, 1);
  for (int ch = 0; ch < kChannels; ++ch) {
    INFO("channel " << ch);
    const auto* send = sends.at(ch);
    const auto* recv = recvs.at(ch);
    CHECK(!send->stopped);
    CHECK(!recv->stopped);
    auto send_steps = sender.childrenOf(*send, "ProxyStep");
    auto recv_steps = receiver.childrenOf(*recv, "ProxyStep");
    CHECK(send_steps.size() == 8u);  // NCCL_STEPS posted, none ever completes to make room
    CHECK(recv_steps.size() == 8u);
    int on_the_network = 0;
    for (const auto* s : send_steps) {
      CHECK(!s->stopped);
      const bool posted_only = s->states == std::vector<int>{np::kProxyStepSendGPUWait};
      const bool on_wire = s->states == kSendStates;
      CHECK((posted_only || on_wire));
      on_the_network += on_wire;
    }
    CHECK(on_the_network >= 1);
    for (const auto* s : recv_steps) {
      CHECK(!s->stopped);
      CHECK(s->states == std::vector<int>{np::kProxyStepRecvWait});
    }
  }
}

TEST_CASE("DeadRankKeepsItsKernelChannelsRunningAndItsGpuStopsFillingAndConsumingSteps") {
  LogDir dir;
  // Every rank its own node: rank 2's connections to 1 and 3 are both NET.
  auto env = profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "1"}, {"SIMGPU_FAULTS", "dead-rank=2@op=1"}});
  auto logs = hangJob(env, 4, dir);
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  const auto& dead = logs.at(2);
  const auto* first = collWithSeq(dead, "AllReduce", 0);
  const auto* hung = collWithSeq(dead, "AllReduce", 1);
  REQUIRE(first != nullptr);
  REQUIRE(hung != nullptr);
  checkKernelChannels(dead, *first, kChannels);
  auto kernels = dead.childrenOf(*hung, "KernelCh");
  CHECK(kernels.size() == static_cast<size_t>(kChannels));
  for (const auto* k : kernels) {
    CHECK(k->states.empty());
    CHECK(!k->stopped);
  }
  auto sends = proxyOpsOf(dead, *hung, true);
  auto recvs = proxyOpsOf(dead, *hung, false);
  REQUIRE(sends.size() == static_cast<size_t>(kChannels));
  REQUIRE(recvs.size() == static_cast<size_t>(kChannels));
  int arrived = 0;
  for (int ch = 0; ch < kChannels; ++ch) {
    INFO("channel " << ch);
    // The proxy posted its buffers; the GPU never fills one.
    auto send_steps = dead.childrenOf(*sends.at(ch), "ProxyStep");
    CHECK(send_steps.size() == 8u);
    for (const auto* s : send_steps) {
      CHECK(s->states == std::vector<int>{np::kProxyStepSendGPUWait});
      CHECK(!s->stopped);
    }
    // The network still delivers into its buffers; the GPU never consumes what arrived.
    auto recv_steps = dead.childrenOf(*recvs.at(ch), "ProxyStep");
    CHECK(recv_steps.size() == 8u);
    for (const auto* s : recv_steps) {
      CHECK(!s->stopped);
      const bool waiting = s->states == std::vector<int>{np::kProxyStepRecvWait};
      const bool for_gpu = s->states == kRecvStates;
      CHECK((waiting || for_gpu));
      arrived += for_gpu;
    }
  }
  CHECK(arrived >= 1);
  // Downstream, rank 3 waits for data rank 2's GPU never sends.
  const auto* downstream = collWithSeq(logs.at(3), "AllReduce", 1);
  REQUIRE(downstream != nullptr);
  for (const auto& [ch, op] : proxyOpsOf(logs.at(3), *downstream, false))
    for (const auto* s : logs.at(3).childrenOf(*op, "ProxyStep"))
      CHECK(s->states == std::vector<int>{np::kProxyStepRecvWait});
}

namespace {

// The unstopped steps of `op`, by their states.
std::map<std::vector<int>, int> openStepStates(const testing::ProcessLog& log, const testing::LoggedEvent& op) {
  std::map<std::vector<int>, int> states;
  for (const auto* s : log.childrenOf(op, "ProxyStep"))
    if (!s->stopped) ++states[s->states];
  return states;
}

int stoppedSteps(const testing::ProcessLog& log, const testing::LoggedEvent& op) {
  int n = 0;
  for (const auto* s : log.childrenOf(op, "ProxyStep")) n += s->stopped;
  return n;
}

}  // namespace

// InfiniBand (src/transport/net_ib: the receiver's irecv posts the clear-to-send into the
// sender's FIFO; ncclIbIsend returns no request until it is there; src/transport/net.cc
// sendProxyProgress records SendPeerWait while isend gives none). With the clear-to-send
// messages 2 -> 1 lost, rank 1 sends what it already had credit for, then its next step
// waits in SendPeerWait forever, while rank 2 has posted its buffers and waits for data.
TEST_CASE("LostCreditLeavesTheSenderWaitingForClearToSendWhileTheReceiverPostedItsBuffers") {
  LogDir dir;
  auto logs = twoNodesHungBy("lost-credit=1->2@op=1", dir);
  const auto& sender = logs.at(1);
  const auto& receiver = logs.at(2);
  auto [sends, recvs] = linkOps(logs, 1, 2, 1);
  const std::vector<int> waiting_for_cts = {np::kProxyStepSendGPUWait, np::kProxyStepSendPeerWait};
  for (int ch = 0; ch < kChannels; ++ch) {
    INFO("channel " << ch);
    auto send_open = openStepStates(sender, *sends.at(ch));
    CHECK(send_open[waiting_for_cts] == 1);
    CHECK(send_open.count(kSendStates) == 0);  // nothing on the wire: the data link is fine
    // Every step that left arrived (up to a buffer's worth: the credits heard before op 1, less
    // any of op 0's steps rank 2 had not yet taken then); the receiver posted buffers beyond them.
    const int sent = stoppedSteps(sender, *sends.at(ch));
    CHECK(sent >= 1);
    CHECK(sent <= 8);
    CHECK(stoppedSteps(receiver, *recvs.at(ch)) == sent);
    auto recv_open = openStepStates(receiver, *recvs.at(ch));
    CHECK(recv_open[{np::kProxyStepRecvWait}] >= 1);
    CHECK(recv_open.size() == 1u);
  }
}

// A sender its receiver holds back (here: it never hears of the freed buffers). On
// InfiniBand the next step waits for the clear-to-send (SendPeerWait); the socket
// transport's isend only queues the request (src/transport/net_socket.cc
// ncclNetSocketIsend), so the same step sits in SendWait, as if on the wire. NCCL_NET picks
// the network (src/init.cc, src/plugin/net.cc ncclNetInit, strcasecmp on the name).
TEST_CASE("ASenderHeldBackByItsReceiverWaitsInSendPeerWaitOnIbAndSendWaitOnSockets") {
  for (const char* net : {"", "ib", "Socket"}) {
    INFO("NCCL_NET=" << net);
    LogDir dir;
    auto env = profilerEnv(dir, kAll,
                           {{"SIMGPU_RANKS_PER_NODE", "1"}, {"SIMGPU_FAULTS", "lost-credit=1->2@op=1"}, {"NCCL_NET", net}});
    auto logs = hangJob(env, 4, dir);
    REQUIRE(logs.size() == static_cast<size_t>(kRanks));
    const auto* task = collWithSeq(logs.at(1), "AllReduce", 1);
    REQUIRE(task != nullptr);
    const bool socket = std::string(net) == "Socket";
    const std::vector<int> held = {np::kProxyStepSendGPUWait,
                                   socket ? np::kProxyStepSendWait : np::kProxyStepSendPeerWait};
    for (const auto& [ch, op] : proxyOpsOf(logs.at(1), *task, true)) {
      INFO("channel " << ch);
      auto open = openStepStates(logs.at(1), *op);
      CHECK(open[held] == 1);
      CHECK(open.count(kSendStates) == 0);  // on IB nothing is on the wire; on sockets nothing waits for the peer
      for (const auto* s : logs.at(1).childrenOf(*op, "ProxyStep")) {
        const bool peer_wait = std::count(s->states.begin(), s->states.end(), np::kProxyStepSendPeerWait) > 0;
        CHECK(peer_wait == (!socket && s->states.size() > 1));
      }
    }
  }
}

// src/proxy.cc ncclProxySaveOp, pattern TreeUpDown: a proxy op per tree peer and direction,
// receives from the children and a send to the parent (the reduce), a receive from the
// parent and sends to the children (the broadcast); src/collectives.cc ncclAlgoToString
// names the algorithm in the Coll event, src/enqueue.cc gives the tree 4 extra warps. Four
// nodes of one rank: tree 0 (channel 0) is 0 -> 2 -> {1, 3}, tree 1 (channel 1) 3 -> 1 -> {2, 0}.
TEST_CASE("ATreeAllReduceReportsTheTreeAndAProxyOpPerTreePeer") {
  LogDir dir;
  auto logs = runJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_ALGO", "allreduce:tree"}}), 2,
                     dir, allReduce);
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  using Ends = std::multiset<std::pair<long, long>>;  // (peer, send)
  const std::map<std::pair<int, long>, Ends> want = {
      {{2, 0}, {{1, 0}, {3, 0}, {0, 1}, {0, 0}, {1, 1}, {3, 1}}},
      {{0, 0}, {{2, 0}, {2, 1}}},
      {{1, 0}, {{2, 1}, {2, 0}}},
      {{2, 1}, {{1, 1}, {1, 0}}},
      {{1, 1}, {{2, 0}, {0, 0}, {3, 1}, {3, 0}, {2, 1}, {0, 1}}},
      {{3, 1}, {{1, 0}, {1, 1}}},
  };
  const long chunks = static_cast<long>((kProfiledCount / kChannels + kSlotBytes / sizeof(float) - 1) / (kSlotBytes / sizeof(float)));
  for (const auto& [rank, log] : logs) {
    for (long seq = 0; seq < 2; ++seq) {
      INFO("rank " << rank << " seq " << seq);
      const auto* coll = collWithSeq(log, "AllReduce", seq);
      REQUIRE(coll != nullptr);
      CHECK(coll->str("algo") == "TREE");
      CHECK(coll->num("warps") == 20);
      checkKernelChannels(log, *coll, kChannels);
      std::map<long, Ends> ends;
      for (const auto* op : log.childrenOf(*coll, "ProxyOp")) {
        ends[op->num("ch")].insert({op->num("peer"), op->num("send")});
        CHECK(op->num("nsteps") == chunks);  // each chunk goes up once and down once
        checkCompletedProxyOp(log, *op, op->num("send") ? kSendStates : kRecvStates);
      }
      for (long ch = 0; ch < kChannels; ++ch) {
        auto it = want.find({rank, ch});
        if (it != want.end()) CHECK(ends[ch] == it->second);
      }
    }
  }
}

// PAT (src/transport/generic.cc ncclTransportPatConnect; src/proxy.cc ncclProxySaveOp,
// patterns PatUp and PatDown): with one rank per node NCCL's cost model takes PAT for these
// sizes (algorithm.h), the Coll event names it with NCCL_MAX_NTHREADS' 20 warps
// (src/enqueue.cc), and each channel has a proxy op per dimension and direction:
// ReduceScatter sends to rank + 2^i and receives from rank - 2^i, AllGather the reverse.
// simnccl's exchange sends 2^i blocks per chunk at dimension i (of 4 ranks: 1, then 2).
TEST_CASE("PatReportsAProxyOpPerDimensionAndDirectionWithNcclsPeers") {
  LogDir dir;
  auto logs = runJob(profilerEnv(dir, kAll, {{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_ALGO", ""}}), 2, dir,
                     [](ncclComm_t comm, std::vector<float>& buf, int op) {
                       static std::vector<float> out(kProfiledCount * kRanks);
                       return op == 0 ? ncclAllGather(buf.data(), out.data(), kProfiledCount, ncclFloat32, comm, nullptr)
                                      : ncclReduceScatter(buf.data(), out.data(), kProfiledCount, ncclFloat32, ncclSum, comm,
                                                          nullptr);
                     });
  REQUIRE(logs.size() == static_cast<size_t>(kRanks));
  const long chunks = static_cast<long>((kProfiledCount / kChannels + kSlotBytes / sizeof(float) - 1) / (kSlotBytes / sizeof(float)));
  for (const auto& [rank, log] : logs) {
    for (const char* func : {"AllGather", "ReduceScatter"}) {
      INFO("rank " << rank << " " << func);
      const auto* coll = collWithSeq(log, func, 0);
      REQUIRE(coll != nullptr);
      CHECK(coll->str("algo") == "PAT");
      CHECK(coll->num("warps") == 20);
      checkKernelChannels(log, *coll, kChannels);
      const int sign = std::string(func) == "AllGather" ? -1 : 1;
      using Ends = std::multiset<std::tuple<long, long, long>>;  // (peer, send, nsteps)
      const Ends want = {{(rank + sign + kRanks) % kRanks, 1, chunks},
                         {(rank + 2 * sign + kRanks) % kRanks, 1, 2 * chunks},
                         {(rank - sign + kRanks) % kRanks, 0, chunks},
                         {(rank - 2 * sign + kRanks) % kRanks, 0, 2 * chunks}};
      std::map<long, Ends> ends;
      for (const auto* op : log.childrenOf(*coll, "ProxyOp")) {
        ends[op->num("ch")].insert({op->num("peer"), op->num("send"), op->num("nsteps")});
        checkCompletedProxyOp(log, *op, op->num("send") ? kSendStates : kRecvStates);
      }
      for (long ch = 0; ch < kChannels; ++ch) CHECK(ends[ch] == want);
    }
  }
}

TEST_CASE("ANetworkNcclDoesNotHaveFailsInitNamingIt") {
  for (auto [net, ib_disable] : {std::pair{"RoCE", ""}, std::pair{"IB", "1"}}) {
    INFO("NCCL_NET=" << net << " NCCL_IB_DISABLE=" << ib_disable);
    LogDir dir;
    auto env = profilerEnv(dir, 0, {{"NCCL_NET", net}, {"NCCL_IB_DISABLE", ib_disable}});
    testing::MultiRankJob job(2);
    ncclUniqueId id = job.id();
    job.start(
        [&](int rank) {
          ncclComm_t comm;
          if (ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess) return 1;
          return std::string(ncclGetLastError(nullptr)).find("NCCL_NET=" + std::string(net)) != std::string::npos ? 0 : 2;
        },
        env);
    CHECK(testing::allZero(job.wait()));
  }
}

// src/enqueue.cc (collTaskAppend, p2pTaskAppend, ncclEnqueueCheck), src/group.cc
// (ncclGroupEndInternal) and src/plugin/profiler.cc (ncclProfilerStartGroupApiEvent,
// ncclProfilerRecordGroupApiEventState, ncclProfilerStart{Coll,P2p}ApiEvent): one GroupApi
// event per outermost group, each call's CollApi/P2pApi event under it, stopped within
// the call, the Coll/P2p events under those.
TEST_CASE("ApiEventsParentTheTasksAsNcclsGroupsNestThem") {
  LogDir dir;
  const int mask = static_cast<int>(np::kColl | np::kP2p | np::kKernelLaunch);
  auto logs = runJob(profilerEnv(dir, mask, {{"SIMGPU_RANKS_PER_NODE", "1"}}), 2, dir,
                     [](ncclComm_t comm, std::vector<float>& buf, int op) {
                       if (op == 0) return allReduce(comm, buf, op);  // a call of its own: implicit group
                       int rank = 0;
                       ncclCommUserRank(comm, &rank);
                       static std::vector<float> out(1024, 1.0f), in(1024);  // apart from the AllReduce's
                       ncclGroupStart();
                       allReduce(comm, buf, op);
                       ncclSend(out.data(), out.size(), ncclFloat32, (rank + 1) % kRanks, comm, nullptr);
                       ncclRecv(in.data(), in.size(), ncclFloat32, (rank + kRanks - 1) % kRanks, comm, nullptr);
                       return ncclGroupEnd();
                     });
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    auto groups = log.ofType("GroupApi");
    REQUIRE(groups.size() == 2);
    CHECK(groups[0]->num("depth") == 1);  // ncclGroupDepth inside the call's own group
    CHECK(groups[1]->num("depth") == 2);  // inside the user's ncclGroupStart
    for (const auto* g : groups) {
      CHECK(g->parent == 0);
      CHECK(g->states == std::vector<int>{np::kGroupStartApiStop, np::kGroupEndApiStart});
      CHECK(g->stopped);
    }
    CHECK(log.childrenOf(*groups[0], "CollApi").size() == 1);
    CHECK(log.childrenOf(*groups[1], "CollApi").size() == 1);
    auto p2p_apis = log.childrenOf(*groups[1], "P2pApi");
    REQUIRE(p2p_apis.size() == 2);
    CHECK(p2p_apis[0]->str("func") == "Send");
    CHECK(p2p_apis[1]->str("func") == "Recv");
    for (const auto* g : groups) CHECK(log.childrenOf(*g, "KernelLaunch").size() == 1);
    for (const auto* api : log.ofType("CollApi")) {
      CHECK(api->stopped);
      auto colls = log.childrenOf(*api, "Coll");
      REQUIRE(colls.size() == 1);
      CHECK(api->stop_line < colls[0]->start_line);  // the Coll names a stopped CollApi
    }
    for (const auto* api : p2p_apis) CHECK(log.childrenOf(*api, "P2p").size() == 1);
  }
}

// src/plugin/profiler.cc, ncclProfilerPluginLoad: ncclProfiler_v5, else ncclProfiler_v4
// through src/plugin/profiler/profiler_v4.cc; and ncclGetNetPluginLib when no profiler
// library opens.
TEST_CASE("AV4PluginAndAProfilerInTheNetPluginsLibraryAreLoadedAsNcclLoadsThem") {
  LogDir dir;
  const std::map<std::string, std::string> census = {{"CENSUS_DIR", dir.path()},
                                                     {"CENSUS_MASKS", std::to_string(np::kColl)},
                                                     {"SIMGPU_RANKS_PER_NODE", "1"}};
  auto env = profilerEnv(dir, 0, census);
  SECTION("v4 only") { env["NCCL_PROFILER_PLUGIN"] = CENSUS_PROFILER_V4_LIBRARY; }
  SECTION("no profiler library: the NET plugin's") {
    env["NCCL_PROFILER_PLUGIN"] = "/nonexistent/libnccl-profiler-none.so";
    env["NCCL_NET_PLUGIN"] = CENSUS_NET_PLUGIN_LIBRARY;
  }
  runJob(env, 1, dir, allReduce);
  const bool v4 = env["NCCL_PROFILER_PLUGIN"] == CENSUS_PROFILER_V4_LIBRARY;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename().string().rfind("census-", 0) != 0) continue;
    ++files;
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(text);
    CHECK(text.find(v4 ? "init version=4" : "init version=5") != std::string::npos);
    CHECK(text.find(v4 ? "start Coll parent=Group: 1" : "start Coll parent=CollApi: 1") != std::string::npos);
    const bool api_events = text.find("start GroupApi") != std::string::npos;
    CHECK(api_events == !v4);
    CHECK(text.find("violation") == std::string::npos);
  }
  CHECK(files == kRanks);
}

namespace {

// Rank 1 receives from rank 0 into `buf`, registered or not, behind a host function that
// holds its stream for `hold_ms`: its receive's proxy operation exists long before its
// kernel reaches it.
int heldBackReceive(int rank, const ncclUniqueId& id, bool register_buffer, int hold_ms) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 100;
  std::vector<float> buf(1 << 16, 1.0f);  // 256 KB: the SIMPLE protocol
  void* reg = nullptr;
  if (register_buffer && ncclCommRegister(comm, buf.data(), buf.size() * sizeof(float), &reg) != ncclSuccess) return 101;
  static std::atomic<bool> released{false};
  if (rank == 1)
    cudaLaunchHostFunc(nullptr, [](void*) { while (!released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, nullptr);
  const ncclResult_t r = rank == 0 ? ncclSend(buf.data(), buf.size(), ncclFloat32, 1, comm, nullptr)
                                   : ncclRecv(buf.data(), buf.size(), ncclFloat32, 0, comm, nullptr);
  if (r != ncclSuccess) return 102;
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  released.store(true);
  if (cudaStreamSynchronize(nullptr) != cudaSuccess) return 103;
  if (reg != nullptr) ncclCommDeregister(comm, reg);
  ncclCommDestroy(comm);
  return 0;
}

}  // namespace

// src/transport/net.cc, recvProxyProgress: a receive into a registered buffer waits for
// its kernel (sub->reg && !sub->regBufferReady) and, on every pass until then, starts step
// 0's event again (ncclProfilerStartRecvProxyStepEvent) without stopping the last one.
TEST_CASE("AHeldBackRegisteredReceiveStartsItsFirstStepAgainOnEveryProxyPass") {
  for (const bool registered : {true, false}) {
    INFO((registered ? "registered" : "not registered"));
    LogDir dir;
    testing::MultiRankJob job(2);
    ncclUniqueId id = job.id();
    job.start([&](int rank) { return heldBackReceive(rank, id, registered, 300); },
              profilerEnv(dir, static_cast<int>(np::kProxyStep), {{"SIMGPU_RANKS_PER_NODE", "1"}}));
    REQUIRE(testing::allZero(job.wait()));
    auto logs = testing::readCallLogs(dir.path());
    const auto& receiver = logs.at(1);
    auto ops = receiver.ofType("ProxyOp");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0]->stopped);
    std::map<long, std::vector<const testing::LoggedEvent*>> starts;
    for (const auto* s : receiver.childrenOf(*ops[0], "ProxyStep")) starts[s->num("step")].push_back(s);
    CHECK(static_cast<long>(starts.size()) == ops[0]->num("nsteps"));
    const auto& first = starts.at(0);
    if (registered) {
      CHECK(first.size() > 50u);  // a pass a millisecond for 300 ms
    } else {
      CHECK(first.size() == 1u);
    }
    for (size_t i = 0; i + 1 < first.size(); ++i) {
      CHECK(first[i]->states.empty());
      CHECK(!first[i]->stopped);
    }
    CHECK(first.back()->states == kRecvStates);
    CHECK(first.back()->stopped);
    for (const auto& [step, events] : starts)
      if (step > 0) CHECK(events.size() == 1u);
  }
}

// src/enqueue.cc: a captured collective's API and KernelLaunch events come when it is
// recorded into the graph (ncclLaunchKernel runs at capture), its Group and Coll events at
// every replay (hostStreamPlanCallback), naming the CollApi event of the capture; replays
// leave comm->seqNumber alone unless KernelCh events are on (ncclProfilerStartTaskEvents).
TEST_CASE("ACapturedCollectiveReportsItsLaunchOnceAndItsTasksAtEveryReplay") {
  LogDir dir;
  constexpr int kReplays = 3;
  auto logs = runJob(profilerEnv(dir, static_cast<int>(np::kColl | np::kKernelLaunch)), 1, dir,
                     [](ncclComm_t comm, std::vector<float>& buf, int) {
                       cudaStream_t stream;
                       cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
                       cudaGraph_t graph = nullptr;
                       cudaGraphExec_t exec = nullptr;
                       if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) return ncclSystemError;
                       ncclAllReduce(buf.data(), buf.data(), kProfiledCount, ncclFloat32, ncclSum, comm, stream);
                       if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) return ncclSystemError;
                       if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return ncclSystemError;
                       for (int i = 0; i < kReplays; ++i) {
                         cudaGraphLaunch(exec, stream);
                         cudaStreamSynchronize(stream);
                       }
                       return ncclSuccess;
                     });
  for (const auto& [rank, log] : logs) {
    INFO("rank " << rank);
    auto group_apis = log.ofType("GroupApi");
    auto coll_apis = log.ofType("CollApi");
    REQUIRE(group_apis.size() == 1);
    REQUIRE(coll_apis.size() == 1);
    CHECK(group_apis[0]->num("graph") == 1);
    CHECK(coll_apis[0]->num("graph") == 1);
    CHECK(log.ofType("KernelLaunch").size() == 1);
    CHECK(log.ofType("Group").size() == static_cast<size_t>(kReplays));
    auto colls = log.childrenOf(*coll_apis[0], "Coll");
    REQUIRE(colls.size() == static_cast<size_t>(kReplays));
    for (const auto* c : colls) CHECK(c->num("seq") == 0);
  }
}
