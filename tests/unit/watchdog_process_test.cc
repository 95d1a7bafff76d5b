// libhangwatch.so inside a process on simgpu: this test program links it ahead of
// the sim libraries, which interposes exactly as LD_PRELOAD does.
#include <catch2/catch.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/watchdog/watchdog.h"
#include "test_env.h"

namespace fs = std::filesystem;

namespace {

std::atomic<bool> release_spin{false};

void spinUntilReleased(int) {
  while (!release_spin.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void noop(int) {}

int pollerThreads() { return test_support::threadsNamed("hangwatch-poll"); }

// A dump root of its own for this test process (each test case runs in its own
// process, before the watchdog reads its environment), removed at exit.
std::string useFreshJobDir(const char* timeout) {
  static const std::string& root = *[] {
    char tmpl[] = "/tmp/hangwatch-proc-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    auto* path = new std::string(tmpl);  // leaked: still needed by the exit handler
    static const std::string* for_exit = path;
    std::atexit([] { fs::remove_all(*for_exit); });
    return path;
  }();
  setenv("HANGWATCH_DUMP_DIR", root.c_str(), 1);
  setenv("HANGWATCH_JOB_ID", "unit", 1);
  setenv("HANGWATCH_TIMEOUT", timeout, 1);
  setenv("HANGWATCH_COLLECT", "0", 1);
  setenv("RANK", "0", 1);
  return root + "/unit";
}

template <typename Pred>
bool waitUntil(Pred pred, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

TEST_CASE("AForkedChildNeverRunsTheParentsPoller") {
  useFreshJobDir("100");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  int arg = 0;
  void* args[] = {&arg};
  REQUIRE(cudaLaunchKernel(simgpu::kernel<&noop>("noop"), dim3(1), dim3(1), args, 0, stream) == cudaSuccess);
  REQUIRE(hangwatch_watchdog_active() == 1);
  // The poller names itself once it runs, which on a loaded machine may be a while.
  REQUIRE(waitUntil([] { return pollerThreads() == 1; }, 30));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Interposed calls in the child are pass-throughs and start nothing.
    ncclGroupStart();
    ncclGroupEnd();
    bool ok = hangwatch_watchdog_active() == 0 && pollerThreads() == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(hangwatch_watchdog_active() == 1);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
}

TEST_CASE("KernelsTimedFromSeveralThreadsAllCompleteThroughThePoller") {
  useFreshJobDir("100");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  constexpr int kThreads = 3, kLaunches = 200;
  std::atomic<int> failed_calls{0};  // Catch assertions are not thread-safe
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&failed_calls] {
      cudaStream_t stream;
      if (cudaStreamCreate(&stream) != cudaSuccess) ++failed_calls;
      int arg = 0;
      void* args[] = {&arg};
      for (int i = 0; i < kLaunches; ++i)
        if (cudaLaunchKernel(simgpu::kernel<&noop>("noop"), dim3(1), dim3(1), args, 0, stream) != cudaSuccess)
          ++failed_calls;
      if (cudaStreamSynchronize(stream) != cudaSuccess) ++failed_calls;
      cudaStreamDestroy(stream);
    });
  for (auto& t : threads) t.join();
  REQUIRE(failed_calls.load() == 0);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= kThreads * kLaunches; }, 10));
  CHECK(hangwatch_ops_completed() == kThreads * kLaunches);
}

TEST_CASE("PassThroughKeepsReturnCodesOfFailingCalls") {
  useFreshJobDir("100");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  cudaStream_t bogus = reinterpret_cast<cudaStream_t>(0x7777);  // not cudaStreamLegacy (0x1)
  int arg = 0;
  void* args[] = {&arg};
  cudaError_t rc = cudaLaunchKernel(simgpu::kernel<&noop>("noop"), dim3(1), dim3(1), args, 0, bogus);
  CHECK(rc == cudaErrorInvalidResourceHandle);
  // The watchdog's own failed event record must not leave a different sticky error behind.
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclInvalidArgument);
}

TEST_CASE("AKernelThatNeverFinishesIsDetectedAndDumped") {
  std::string job = useFreshJobDir("1");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  int arg = 0;
  void* args[] = {&arg};
  release_spin = false;
  REQUIRE(cudaLaunchKernel(simgpu::kernel<&spinUntilReleased>("spin_on_flag"), dim3(1), dim3(1), args, 0, stream) ==
          cudaSuccess);
  const std::string snapshot = hangwatch::watchdogSnapshotPath(job, 0);
  bool dumped = waitUntil([&] { return fs::exists(snapshot); }, 4);
  release_spin = true;
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(dumped);
  CHECK(fs::exists(hangwatch::triggerPath(job)));
  std::ifstream in(snapshot);
  auto j = nlohmann::json::parse(in);
  CHECK(j["detected_here"] == true);
  REQUIRE(j["streams"].size() == 1);
  CHECK(j["streams"][0]["pending"][0]["op"] == "kernel:spin_on_flag");
  CHECK(j["trigger"]["reason"] == "timeout");
}

TEST_CASE("BackToBackOneSecondGemmsUnderATwoSecondTimeoutDoNotTrigger") {
  std::string job = useFreshJobDir("2");
  setenv("SIMGPU_TFLOPS", "0.001", 1);  // 2*800^3 flop at 1 GFLOP/s: about 1 s
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cublasHandle_t handle;
  REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS);
  constexpr int n = 800;
  float *a, *b, *c;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&a), n * n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&b), n * n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&c), n * n * sizeof(float)) == cudaSuccess);
  float one = 1, zero = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i)
    REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n) ==
            CUBLAS_STATUS_SUCCESS);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Back to back they take longer than the timeout; each alone is well under it.
  CHECK(took > 2.0);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= 2; }, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(fs::exists(hangwatch::triggerPath(job)));
  cublasDestroy(handle);
}

TEST_CASE("GroupedCollectivesAreTimedAroundTheGroupEndKernel") {
  useFreshJobDir("100");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* buf;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float)) == cudaSuccess);
  const unsigned long long before = hangwatch_ops_completed();
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 512, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(waitUntil([&] { return hangwatch_ops_completed() >= before + 2; }, 5));
  CHECK(hangwatch_ops_completed() == before + 2);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
}

namespace {

// A one-rank communicator, a stream and a device buffer of `floats`, as a job makes them.
struct OneRankComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buf = nullptr;
  explicit OneRankComm(size_t floats) {
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), floats * sizeof(float)) == cudaSuccess);
  }
};

// Writes TRIGGER.json by hand and reads this rank's snapshot once the watchdog wrote it.
nlohmann::json snapshotOnTrigger(const std::string& job) {
  fs::create_directories(job);
  {
    std::ofstream trigger(hangwatch::triggerPath(job));
    trigger << R"({"reason": "unit test", "pid": 1})" << "\n";
  }
  const std::string snapshot = hangwatch::watchdogSnapshotPath(job, 0);
  REQUIRE(waitUntil([&] { return fs::exists(snapshot); }, 10));
  return nlohmann::json::parse(std::ifstream(snapshot));
}

}  // namespace

TEST_CASE("GroupSimulateEndEndsTheGroupSoLaterCollectivesAreTimedAndCounted") {
  const std::string job = useFreshJobDir("100");
  OneRankComm c(1024);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(c.buf, c.buf, 1024, ncclFloat32, ncclSum, c.comm, c.stream) == ncclSuccess);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  REQUIRE(ncclGroupSimulateEnd(&sim) == ncclSuccess);
  CHECK(sim.estimatedTime >= 0.0f);
  // The group is over: this collective runs on its own, is timed, and is seq 0.
  REQUIRE(ncclAllReduce(c.buf, c.buf, 1024, ncclFloat32, ncclSum, c.comm, c.stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(c.stream) == cudaSuccess);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= 1; }, 5));
  CHECK(hangwatch_ops_completed() == 1);
  nlohmann::json s = snapshotOnTrigger(job);
  REQUIRE(s["comms"].size() == 1);
  CHECK(s["comms"][0]["last_issued_seq"] == 0);
  CHECK(s["comms"][0]["last_completed_seq"] == 0);
  // The seq the simulated group gave back is kept once, as the collective that took it again.
  REQUIRE(s["comms"][0]["recent"].size() == 1);
  CHECK(s["comms"][0]["recent"][0]["seq"] == 0);
  CHECK(s["comms"][0]["recent"][0]["count"] == 1024);
  REQUIRE(ncclCommDestroy(c.comm) == ncclSuccess);
}

TEST_CASE("TheSnapshotKeepsTheLastCollectivesIssuedOnEachCommunicatorWithTheirArguments") {
  const std::string job = useFreshJobDir("100");
  OneRankComm c(64);
  for (size_t n = 1; n <= 20; ++n)
    REQUIRE(ncclAllReduce(c.buf, c.buf, n, ncclFloat32, ncclSum, c.comm, c.stream) == ncclSuccess);
  REQUIRE(ncclBroadcast(c.buf, c.buf, 8, ncclInt64, 0, c.comm, c.stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(c.stream) == cudaSuccess);
  auto s = hangwatch::watchdogSnapshotFromJson(snapshotOnTrigger(job));
  REQUIRE(s.ok());
  REQUIRE(s->comms.size() == 1);
  const std::vector<hangwatch::SnapshotIssuedOp>& recent = s->comms[0].recent;
  // The last 16 of 21, oldest first: seqs 5..20, each with the count it was called with.
  REQUIRE(recent.size() == 16);
  for (size_t i = 0; i + 1 < recent.size(); ++i) {
    CHECK(recent[i].seq == 5 + i);
    CHECK(recent[i].op == "ncclAllReduce");
    CHECK(recent[i].count == 6 + i);
    CHECK(recent[i].dtype == "float32");
    CHECK_FALSE(recent[i].root);
  }
  CHECK(recent.back().seq == 20);
  CHECK(recent.back().op == "ncclBroadcast");
  CHECK(recent.back().count == 8);
  CHECK(recent.back().dtype == "int64");
  CHECK(recent.back().root == std::optional<int>(0));
  REQUIRE(ncclCommDestroy(c.comm) == ncclSuccess);
}

TEST_CASE("TheSnapshotCountsTheSendsAndReceivesIssuedToEachPeer") {
  const std::string job = useFreshJobDir("100");
  OneRankComm c(64);
  // A one-rank communicator talks to itself: four grouped exchanges, then a collective.
  for (int i = 0; i < 4; ++i) {
    REQUIRE(ncclGroupStart() == ncclSuccess);
    REQUIRE(ncclSend(c.buf, 8, ncclFloat32, 0, c.comm, c.stream) == ncclSuccess);
    REQUIRE(ncclRecv(c.buf, 8, ncclFloat32, 0, c.comm, c.stream) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
  }
  REQUIRE(ncclAllReduce(c.buf, c.buf, 8, ncclFloat32, ncclSum, c.comm, c.stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(c.stream) == cudaSuccess);
  auto s = hangwatch::watchdogSnapshotFromJson(snapshotOnTrigger(job));
  REQUIRE(s.ok());
  REQUIRE(s->comms.size() == 1);
  REQUIRE(s->comms[0].p2p.size() == 1);
  CHECK(s->comms[0].p2p[0].peer == 0);
  CHECK(s->comms[0].p2p[0].sends == 4u);
  CHECK(s->comms[0].p2p[0].receives == 4u);
  CHECK(s->comms[0].p2p_untracked == 0u);
  // Transfers take no collective sequence number.
  CHECK(s->comms[0].last_issued_seq == std::optional<uint64_t>(0));
  REQUIRE(ncclCommDestroy(c.comm) == ncclSuccess);
}

TEST_CASE("PeersBeyondTheKeptOnesAreCountedAsUntracked") {
  hangwatch::watchdog::P2pCounts counts;
  for (int peer = 0; peer < hangwatch::watchdog::P2pCounts::kPeers + 2; ++peer) {
    // Each transfer's number between the pair, from 1; 0 for a peer beyond the kept ones.
    const uint64_t k = counts.note(peer * 3, peer % 2 == 0);
    CHECK(k == (peer < hangwatch::watchdog::P2pCounts::kPeers ? 1u : 0u));
  }
  CHECK(counts.note(0, false) == 1u);
  CHECK(counts.note(0, false) == 2u);
  const auto peers = counts.read();
  REQUIRE(peers.size() == static_cast<size_t>(hangwatch::watchdog::P2pCounts::kPeers));
  CHECK(peers[0].peer == 0);
  CHECK(peers[0].sends == 1u);
  CHECK(peers[0].receives == 2u);
  CHECK(peers[1].peer == 3);
  CHECK(peers[1].receives == 1u);
  CHECK(counts.untracked() == 2u);
}

TEST_CASE("WorkOnEachDeviceIsTimedWithThatDevicesEvents") {
  useFreshJobDir("100");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  int arg = 0;
  void* args[] = {&arg};
  const void* kernel = simgpu::kernel<&noop>("noop");
  // An intercepted call before the program picks its device times nothing on device 0.
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  cudaStream_t on1;
  REQUIRE(cudaStreamCreate(&on1) == cudaSuccess);
  REQUIRE(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, on1) == cudaSuccess);
  REQUIRE(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, nullptr) == cudaSuccess);  // device 1's stream 0
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, nullptr) == cudaSuccess);  // device 0's stream 0
  REQUIRE(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, cudaStreamPerThread) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(on1) == cudaSuccess);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= 4; }, 10));
  CHECK(hangwatch_ops_completed() == 4);
  // An NCCL operation on device 2's stream while device 0 is current: device 2's events
  // are made for it (device 2 current for the moment), and device 0 is current again after.
  REQUIRE(cudaSetDevice(2) == cudaSuccess);
  cudaStream_t on2;
  REQUIRE(cudaStreamCreate(&on2) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  REQUIRE(cudaSetDevice(2) == cudaSuccess);
  ncclComm_t comm;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  float* buf;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), 256 * sizeof(float)) == cudaSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, on2) == ncclSuccess);
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
  REQUIRE(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess);  // device 2's stream 0
  REQUIRE(cudaStreamSynchronize(on2) == cudaSuccess);
  REQUIRE(cudaSetDevice(2) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= 6; }, 10));
  CHECK(hangwatch_ops_completed() == 6);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("AChildCommunicatorMadeInAGroupIsNotAskedAboutBeforeItIsReady") {
  const std::string job = useFreshJobDir("100");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t parent;
  REQUIRE(ncclCommInitRank(&parent, 1, id, 0) == ncclSuccess);
  ncclComm_t child = nullptr;
  // In a group the child is made at ncclGroupEnd: asking NCCL for its rank before that
  // is a WARN in the user's log ("Attempt to use communicator before ...").
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclCommSplit(parent, 0, 0, &child, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(child != nullptr);
  CHECK(std::string(ncclGetLastError(nullptr)).find("Attempt to use communicator") == std::string::npos);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* buf;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float)) == cudaSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, child, stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(std::string(ncclGetLastError(nullptr)).find("Attempt to use communicator") == std::string::npos);
  fs::create_directories(job);
  std::ofstream(hangwatch::triggerPath(job)) << R"({"reason": "unit test", "pid": 1})" << "\n";
  const std::string snapshot = hangwatch::watchdogSnapshotPath(job, 0);
  REQUIRE(waitUntil([&] { return fs::exists(snapshot); }, 10));
  nlohmann::json s = nlohmann::json::parse(std::ifstream(snapshot));
  REQUIRE(s["comms"].size() == 2);
  // Known once the child was used: its first collective asked NCCL on the user's thread.
  CHECK(s["comms"][1]["rank"] == 0);
  CHECK(s["comms"][1]["size"] == 1);
  CHECK(s["comms"][1]["device"] == 0);
  REQUIRE(ncclCommDestroy(child) == ncclSuccess);
  REQUIRE(ncclCommDestroy(parent) == ncclSuccess);
}

TEST_CASE("ThreadsOnSeveralDevicesMakeTheirTimersConcurrentlyAndEveryLaunchIsTimedOnce") {
  useFreshJobDir("100");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  constexpr int kThreads = 4, kLaunches = 100;
  std::atomic<int> failed_calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &failed_calls] {
      // Two threads per device: they race to make that device's timer.
      if (cudaSetDevice(t % 2 + 1) != cudaSuccess) ++failed_calls;
      cudaStream_t stream;
      if (cudaStreamCreate(&stream) != cudaSuccess) ++failed_calls;
      int arg = 0;
      void* args[] = {&arg};
      for (int i = 0; i < kLaunches; ++i)
        if (cudaLaunchKernel(simgpu::kernel<&noop>("noop"), dim3(1), dim3(1), args, 0, stream) != cudaSuccess)
          ++failed_calls;
      if (cudaStreamSynchronize(stream) != cudaSuccess) ++failed_calls;
      cudaStreamDestroy(stream);
    });
  for (auto& t : threads) t.join();
  REQUIRE(failed_calls.load() == 0);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= kThreads * kLaunches; }, 20));
  CHECK(hangwatch_ops_completed() == kThreads * kLaunches);
}

TEST_CASE("WorkCapturedIntoAGraphIsNotTimedUntilTheGraphIsLaunchedAndEachLaunchIsOneOp") {
  const std::string job = useFreshJobDir("1");
  setenv("HANGWATCH_KERNEL_SAMPLE", "1", 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  float* buf;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), 256 * sizeof(float)) == cudaSuccess);
  int arg = 0;
  void* args[] = {&arg};
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaLaunchKernel(simgpu::kernel<&noop>("noop"), dim3(1), dim3(1), args, 0, stream) == cudaSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  cudaGraph_t graph;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  // Longer than the 1 s timeout between capture and first launch: nothing of the
  // capture may look pending (its events could not even be queried).
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  CHECK_FALSE(fs::exists(hangwatch::triggerPath(job)));
  CHECK(hangwatch_ops_completed() == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(waitUntil([] { return hangwatch_ops_completed() >= 3; }, 10));
  CHECK(hangwatch_ops_completed() == 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(fs::exists(hangwatch::triggerPath(job)));
  // The replays advanced the communicator's seq: the next eager collective is seq 3.
  REQUIRE(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  fs::create_directories(job);
  std::ofstream(hangwatch::triggerPath(job)) << R"({"reason": "unit test", "pid": 1})" << "\n";
  const std::string snapshot = hangwatch::watchdogSnapshotPath(job, 0);
  REQUIRE(waitUntil([&] { return fs::exists(snapshot); }, 10));
  nlohmann::json s = nlohmann::json::parse(std::ifstream(snapshot));
  CHECK(s["comms"][0]["last_issued_seq"] == 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
}
