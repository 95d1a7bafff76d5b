// A receive held back for a long stall, for the profiler chain's bounded-memory check
// (tests/e2e/test_profiler_chain.py, HeldBackReceiveStall):
//   held_back_receive_stall SECONDS OUT_FILE
// Two forked ranks (run it with SIMGPU_RANKS_PER_NODE=1: every link a network link).
// Rank 1 registers its receive buffer, holds its stream for SECONDS with a host function
// and posts a receive from rank 0 behind it, so NCCL's proxy (simnccl's) starts the
// receive's first step again on every pass (src/transport/net.cc, recvProxyProgress) for
// the whole stall. Rank 1 writes "rss_kb_at_5s=N rss_kb_at_end=N" to OUT_FILE just
// before it lets the stream go; both ranks then finish.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_released{false};

long residentKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

int rankMain(int rank, const ncclUniqueId& id, int seconds, const char* out) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 10;
  std::vector<float> buf(1 << 16, 1.0f);
  void* reg = nullptr;
  if (ncclCommRegister(comm, buf.data(), buf.size() * sizeof(float), &reg) != ncclSuccess) return 11;
  if (rank == 1) {
    cudaLaunchHostFunc(nullptr, [](void*) {
      while (!g_released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }, nullptr);
  }
  const ncclResult_t r = rank == 0 ? ncclSend(buf.data(), buf.size(), ncclFloat32, 1, comm, nullptr)
                                   : ncclRecv(buf.data(), buf.size(), ncclFloat32, 0, comm, nullptr);
  if (r != ncclSuccess) return 12;
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    const long at_5s = residentKb();
    std::this_thread::sleep_for(std::chrono::seconds(seconds > 5 ? seconds - 5 : 0));
    const long at_end = residentKb();
    if (FILE* f = std::fopen(out, "w")) {
      std::fprintf(f, "rss_kb_at_5s=%ld rss_kb_at_end=%ld\n", at_5s, at_end);
      std::fclose(f);
    }
    g_released.store(true);
  }
  if (cudaStreamSynchronize(nullptr) != cudaSuccess) return 13;
  ncclCommDeregister(comm, reg);
  ncclCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SECONDS OUT_FILE\n", argv[0]);
    return 2;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  pid_t pids[2];
  for (int rank = 0; rank < 2; ++rank) {
    pids[rank] = fork();
    if (pids[rank] == 0) _exit(rankMain(rank, id, std::atoi(argv[1]), argv[2]));
  }
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) worst = 1;
  }
  return worst;
}
