// NCCL_DEBUG as NCCL 2.28.9 prints it (src/debug.cc), and the INFO lines that name each NET
// connection's NIC (src/transport/net.cc), read back from NCCL_DEBUG_FILE as a tool would.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdio_ext.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/simgpu/nccl/debug_log.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/unique_id.h"
#include "multi_rank.h"

namespace {

namespace fs = std::filesystem;

// NCCL's format strings, verbatim from v2.28.9-1.
const char* const kNcclFormats[] = {
    "NET/IB : Using%s %s; OOB %s:%s",                                                              // net_ib.cc:839
    "NET/Socket : Using%s",                                                                        // net_socket.cc:76
    "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",     // init.cc:1574
    "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",  // init.cc:1598
    "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s",                               // net.cc:313
    "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s",                            // net.cc:359
    "Connected all rings, use ring PXN %d GDR %d",                                                 // generic.cc:37
    "Connected all trees",                                                                         // generic.cc:56
    "Connected binomial trees",                                                                    // generic.cc:79
    "%s",                                                                                          // init.cc:608
};

// A regex matching what printf makes of `format`.
std::string regexFromPrintf(const std::string& format) {
  static const std::map<std::string, std::string> kSpecs = {
      {"%s", ".*"}, {"%d", "-?[0-9]+"}, {"%02d", "[0-9]{2,}"}, {"%p", "(0x[0-9a-f]+|\\(nil\\))"},
      {"%lx", "[0-9a-f]+"}, {"%llx", "[0-9a-f]+"}};
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%') {
      for (const auto& [spec, re] : kSpecs)
        if (format.compare(i, spec.size(), spec) == 0) {
          out += re;
          i += spec.size() - 1;
          break;
        }
      continue;
    }
    if (std::string("[](){}.*+?^$|\\/").find(format[i]) != std::string::npos) out += '\\';
    out += format[i];
  }
  return out;
}

// src/debug.cc:346,359: "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <message>".
bool isNcclInfoLine(const std::string& line, const std::string& host, int pid) {
  const std::string prefix = fmt::format("^{}:{}:[0-9]+ \\[[0-9]+\\] NCCL INFO ", host, pid);
  for (const char* f : kNcclFormats)
    if (std::regex_match(line, std::regex(prefix + regexFromPrintf(f) + "$"))) return true;
  return false;
}

std::string hostName() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string h = name;
  return h.substr(0, h.find('.'));
}

std::vector<std::string> readLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

bool hasLineContaining(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

std::vector<std::string> netConnectionLines(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines)
    if (l.find("] via NET/") != std::string::npos) out.push_back(l);
  return out;
}

struct DebugTmpDir {
  fs::path path = fs::temp_directory_path() / fmt::format("simnccl-debug-{}-{}", getpid(), std::rand());
  DebugTmpDir() { fs::create_directories(path); }
  ~DebugTmpDir() { fs::remove_all(path); }
};

std::map<std::string, std::string> jobEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env = {{"SIMGPU_HOSTID", ""}, {"RANK", ""}, {"OMPI_COMM_WORLD_RANK", ""},
                                            {"SLURM_PROCID", ""}, {"PMI_RANK", ""}};
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

// Each rank, on device rank % 2, makes the communicator and runs `body`; its pid goes on the
// board. Its standard output goes to <dir>/stdout.<rank>.
std::vector<int> runJob(testing::MultiRankJob& job, int nranks, const fs::path& dir,
                        const std::map<std::string, std::string>& env, const std::function<void(ncclComm_t, int)>& body) {
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start(
      [&](int rank) {
        __fpurge(stdout);  // the test runner's own unwritten output is not this rank's
        const int out = ::open((dir / fmt::format("stdout.{}", rank)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(out, STDOUT_FILENO);
        if (env.count("NCCL_DEBUG") == 0) unsetenv("NCCL_DEBUG");
        simnccl::resetDebugLog();  // what the parent may have read before the fork
        cudaSetDevice(rank % 2);
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
        body(comm, rank);
        cudaDeviceSynchronize();
        ncclCommDestroy(comm);
        board.progress[rank].store(getpid());
        std::fflush(stdout);
        return 0;
      },
      jobEnv(env));
  REQUIRE(testing::allZero(job.wait()));
  return job.snapshot();
}

void allReduceOnce(ncclComm_t comm, int) {
  std::vector<float> buf(4096, 1.0f);
  ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  cudaDeviceSynchronize();  // the buffer lives only as long as this function
}

uint64_t commIdOf(const ncclUniqueId& id) { return simnccl::communicatorId(simnccl::segmentNameFromId(id)->c_str()); }

}  // namespace

TEST_CASE("NcclDebugInfoNamesTheNicOfEveryRingConnectionBetweenNodes") {
  // Nodes {0,1} and {2,3}, rank r on device r % 2 and so on mlx5_<r % 2>. The ring 0->1->2->3->0
  // crosses nodes at 1->2 and 3->0, on each of the 2 channels.
  DebugTmpDir tmp;
  const int nranks = 4;
  testing::MultiRankJob job(nranks);
  const uint64_t comm_id = commIdOf(job.id());
  const std::vector<int> pids = runJob(job, nranks, tmp.path,
                                       {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,NET"},
                                        {"NCCL_DEBUG_FILE", (tmp.path / "nccl.%h.%p").string()},
                                        {"SIMGPU_RANKS_PER_NODE", "2"}, {"NCCL_ALGO", "Ring"}},
                                       allReduceOnce);
  const std::string host = hostName();
  const std::map<int, std::vector<std::string>> expected = {
      {0, {"Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA", "Channel 01/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA"}},
      {1, {"Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA", "Channel 01/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA"}},
      {2, {"Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA", "Channel 01/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA"}},
      {3, {"Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA", "Channel 01/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA"}}};
  for (int rank = 0; rank < nranks; ++rank) {
    INFO("rank " << rank);
    const fs::path file = tmp.path / fmt::format("nccl.{}.{}", host, pids[static_cast<size_t>(rank)]);
    REQUIRE(fs::exists(file));
    const std::vector<std::string> lines = readLines(file);
    for (const std::string& l : lines) {
      INFO(l);
      CHECK(isNcclInfoLine(l, host, pids[static_cast<size_t>(rank)]));
    }
    CHECK(hasLineContaining(lines, "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB"));
    CHECK(hasLineContaining(lines, "[7]mlx5_7:1/IB [RO]; OOB eth0:"));
    // comm %p, then NCCL's fields; commId is the id's hash a profiler plugin is given.
    const std::regex init(fmt::format("NCCL INFO ncclCommInitRank comm 0x[0-9a-f]+ rank {} nranks 4 cudaDev {} nvmlDev "
                                      "{} busId [0-9a-f]+ commId {:#x} - Init (START|COMPLETE)$",
                                      rank, rank % 2, rank % 2, comm_id));
    int inits = 0;
    for (const std::string& l : lines) inits += std::regex_search(l, init) ? 1 : 0;
    CHECK(inits == 2);
    CHECK(hasLineContaining(lines, "NCCL INFO Connected all rings, use ring PXN 0 GDR 1"));
    std::vector<std::string> net;
    for (const std::string& l : netConnectionLines(lines)) net.push_back(l.substr(l.find("Channel")));
    CHECK(net == expected.at(rank));
  }
  for (int rank = 0; rank < nranks; ++rank) CHECK(readLines(tmp.path / fmt::format("stdout.{}", rank)) == std::vector<std::string>{});
}

TEST_CASE("NcclDebugUnsetWritesNothing") {
  DebugTmpDir tmp;
  testing::MultiRankJob job(4);
  runJob(job, 4, tmp.path,
         {{"NCCL_DEBUG_FILE", (tmp.path / "nccl.%h.%p").string()}, {"SIMGPU_RANKS_PER_NODE", "2"}},
         allReduceOnce);
  for (const auto& entry : fs::directory_iterator(tmp.path)) {
    INFO(entry.path());
    CHECK(entry.path().filename().string().rfind("stdout.", 0) == 0);
    CHECK(fs::file_size(entry.path()) == 0);
  }
}

// NCCL_DEBUG_SUBSYS selects by any shared bit (src/debug.cc:281, flags & mask): the NET lines
// are logged under INIT|NET, so ^NET still prints them and only leaving out both drops them.
TEST_CASE("NcclDebugSubsysSelectsTheLinesByAnyOfTheirSubsystems") {
  const std::map<std::string, std::pair<bool, bool>> cases = {
      // NCCL_DEBUG_SUBSYS: (Init START printed, NET connection lines printed)
      {"^NET", {true, true}}, {"^INIT,NET", {false, false}}, {"NET", {false, true}}, {"COLL", {false, false}},
      {"", {true, true}}};  // unset: INIT,BOOTSTRAP,ENV
  for (const auto& [subsys, want] : cases) {
    INFO("NCCL_DEBUG_SUBSYS=" << subsys);
    DebugTmpDir tmp;
    std::map<std::string, std::string> env = {{"NCCL_DEBUG", "info"}, {"NCCL_DEBUG_FILE", (tmp.path / "nccl.%p").string()},
                                              {"SIMGPU_RANKS_PER_NODE", "2"}, {"NCCL_ALGO", "Ring"}};
    if (!subsys.empty()) env["NCCL_DEBUG_SUBSYS"] = subsys;
    testing::MultiRankJob job(4);
    const std::vector<int> pids = runJob(job, 4, tmp.path, env, allReduceOnce);
    const std::vector<std::string> lines = readLines(tmp.path / fmt::format("nccl.{}", pids[1]));
    CHECK(hasLineContaining(lines, "- Init START") == want.first);
    CHECK(!netConnectionLines(lines).empty() == want.second);
    const bool init_or_net = want.first || want.second;
    CHECK(hasLineContaining(lines, "NET/IB : Using") == init_or_net);
  }
}

// Tree, PAT, ring and point-to-point connections, each printed once however often it is used:
// four ranks alone on their nodes (PAT needs one rank per node), under NCCL_NET=Socket.
TEST_CASE("NcclDebugPrintsEveryAlgorithmsConnectionsOnce") {
  DebugTmpDir tmp;
  testing::MultiRankJob job(4);
  auto body = [](ncclComm_t comm, int rank) {
    std::vector<float> buf(4096, 1.0f), all(4 * 4096);
    for (int round = 0; round < 2; ++round) {
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);  // tree
      ncclAllGather(buf.data(), all.data(), buf.size(), ncclFloat32, comm, nullptr);            // PAT
      ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclFloat32, 0, comm, nullptr);         // ring
      ncclGroupStart();
      ncclSend(buf.data(), buf.size(), ncclFloat32, rank ^ 2, comm, nullptr);
      ncclRecv(all.data(), buf.size(), ncclFloat32, rank ^ 2, comm, nullptr);
      ncclGroupEnd();
      cudaDeviceSynchronize();
    }
  };
  const std::vector<int> pids = runJob(job, 4, tmp.path,
                                       {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,NET"},
                                        {"NCCL_DEBUG_FILE", (tmp.path / "nccl.%p").string()},
                                        {"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_NET", "Socket"},
                                        {"NCCL_ALGO", "allreduce:tree;allgather:pat;broadcast:ring"}},
                                       body);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const std::vector<std::string> lines = readLines(tmp.path / fmt::format("nccl.{}", pids[static_cast<size_t>(rank)]));
    for (const std::string& l : lines) {
      INFO(l);
      CHECK(isNcclInfoLine(l, hostName(), pids[static_cast<size_t>(rank)]));
    }
    CHECK(hasLineContaining(lines, "NCCL INFO NET/Socket : Using [0]eth0:"));
    CHECK(hasLineContaining(lines, "NCCL INFO Connected all trees"));
    CHECK(hasLineContaining(lines, "NCCL INFO Connected binomial trees"));
    CHECK(hasLineContaining(lines, "NCCL INFO Connected all rings, use ring PXN 0 GDR 0"));
    const int peer = rank ^ 2;
    const std::string me = fmt::format("{}[{}]", rank, rank % 2), them = fmt::format("{}[{}]", peer, peer % 2);
    CHECK(hasLineContaining(lines, fmt::format("Channel 00/1 : {} -> {} [send] via NET/Socket/0/Shared", me, them)));
    CHECK(hasLineContaining(lines, fmt::format("Channel 00/1 : {} -> {} [receive] via NET/Socket/0/Shared", them, me)));
    std::set<std::string> seen;
    for (const std::string& l : netConnectionLines(lines)) {
      INFO(l);
      CHECK(seen.insert(l.substr(l.find("Channel"))).second);
    }
  }
}

TEST_CASE("NcclDebugFileNameExpandsAsNcclDoes") {
  DebugTmpDir tmp;
  testing::MultiRankJob job(1);
  const std::vector<int> pids = runJob(
      job, 1, tmp.path,
      {{"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", (tmp.path / "log.%h.%p.%%.%x").string()}},
      [](ncclComm_t, int) { simnccl::debugLog(simnccl::kLogWarn, simnccl::subsys::kAll, "misc/x.cc", 12, "broke %d", 7); });
  const fs::path file = tmp.path / fmt::format("log.{}.{}.%.%x", hostName(), pids[0]);
  REQUIRE(fs::exists(file));
  const std::vector<std::string> lines = readLines(file);
  // WARN: a leading newline and NCCL's default timestamp (NCCL_DEBUG_TIMESTAMP_LEVELS=WARN);
  // at WARN, rank 0 also prints the bare version line (src/init.cc:606).
  const std::regex warn(fmt::format("^\\[[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}} [0-9:]{{8}}\\] {}:{}:[0-9]+ \\[0\\] misc/x.cc:12 "
                                    "NCCL WARN broke 7$",
                                    hostName(), pids[0]));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == fmt::format("NCCL version {}.{}.{}+cuda{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                                CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10));
  CHECK(lines[1].empty());
  CHECK(std::regex_match(lines[2], warn));
}
