#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include <fstream>
#include <sstream>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/node_summary.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/forensics/cli/collect_command.h"
#include "hangwatch/forensics/cli/node_summary_command.h"
#include "hangwatch/forensics/cli/ras_command.h"
#include "hangwatch/forensics/collector.h"

using hangwatch::forensics::CollectCommand;

namespace {

std::vector<std::string> args(std::initializer_list<const char*> a) { return {a.begin(), a.end()}; }

}  // namespace

TEST_CASE("CollectParsesTheContractArguments") {
  auto o = CollectCommand::parse(args({"--pid", "123", "--rank", "7", "--out", "/tmp/job", "--backend", "sim"}), nullptr);
  REQUIRE(o.ok());
  CHECK(o->pid == 123);
  CHECK(o->rank == 7);
  CHECK(o->out_dir == "/tmp/job");
  CHECK(o->backend == "sim");
  CHECK(o->debugger.empty());
  CHECK_FALSE(o->mark_state);
  auto marked = CollectCommand::parse(args({"--pid", "123", "--rank", "7", "--state", "--out", "/tmp/job"}), nullptr);
  REQUIRE(marked.ok());
  CHECK(marked->mark_state);
}

TEST_CASE("CollectAcceptsEqualsFormAndTimeouts") {
  auto o = CollectCommand::parse(
      args({"--pid=5", "--out=/d", "--timeout-fast=0.5", "--timeout-debugger", "3"}), "/opt/cuda-gdb");
  REQUIRE(o.ok());
  CHECK(o->pid == 5);
  CHECK_FALSE(o->rank.has_value());
  CHECK(o->backend == "auto");
  CHECK(o->timeout_fast_s == 0.5);
  CHECK(o->timeout_debugger_s == 3);
  CHECK(o->debugger == "/opt/cuda-gdb");
}

TEST_CASE("CollectRejectsBadArgumentsWithAReason") {
  auto error = [](std::initializer_list<const char*> a) {
    auto o = CollectCommand::parse(args(a), nullptr);
    REQUIRE_FALSE(o.ok());
    return o.error();
  };
  CHECK(error({"--out", "/d"}).find("--pid is required") != std::string::npos);
  CHECK(error({"--pid", "1"}).find("--out is required") != std::string::npos);
  CHECK(error({"--pid", "abc", "--out", "/d"}).find("--pid") != std::string::npos);
  CHECK(error({"--pid", "-4", "--out", "/d"}).find("--pid") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--backend", "gpu"}).find("auto, cuda, sim or host") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "-1"}).find("--rank") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--frobnicate"}).find("unknown argument '--frobnicate'") != std::string::npos);
  CHECK(error({"--pid", "1", "--out"}).find("--out needs a value") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--timeout-fast", "0"}).find("--timeout-fast") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--state"}).find("--state needs --rank") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "2", "--node", "0-3"}).find("--node needs --state") !=
        std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "2", "--state", "--node", "zero"}).find("--node wants ranks") !=
        std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "2", "--state", "--node", ""}).find("--node wants ranks") !=
        std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "2", "--state", "--node", "5-3"}).find("--node wants ranks") !=
        std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/d", "--rank", "2", "--state", "--node", "1,,2"}).find("--node wants ranks") !=
        std::string::npos);
}

TEST_CASE("RasParsesItsArgumentsAndNamesItsFileByRank") {
  using hangwatch::forensics::RasCommand;
  auto o = RasCommand::parse(args({"--pid", "77", "--rank", "4", "--out", "/j", "--bound=7.5"}));
  REQUIRE(o.ok());
  CHECK(o->pid == 77);
  CHECK(o->rank == 4);
  CHECK(o->out_dir == "/j");
  CHECK(o->bound_s == 7.5);
  auto printed = RasCommand::parse(args({"--pid", "77"}));
  REQUIRE(printed.ok());
  CHECK(printed->out_dir.empty());
  CHECK(printed->bound_s == 20);
  auto error = [](std::initializer_list<const char*> a) {
    auto p = RasCommand::parse(args(a));
    REQUIRE_FALSE(p.ok());
    return p.error();
  };
  CHECK(error({"--rank", "1"}).find("--pid is required") != std::string::npos);
  CHECK(error({"--pid", "1", "--out", "/j"}).find("--out needs --rank") != std::string::npos);
  CHECK(error({"--pid", "1", "--bound", "0"}).find("--bound") != std::string::npos);
  CHECK(error({"--pid", "1", "--node", "0"}).find("unknown argument '--node'") != std::string::npos);
  CHECK(error({"--pid", "1", "--rank"}).find("--rank needs a value") != std::string::npos);
  CHECK(error({"--pid", "1", "--rank", "2", "--out="}).find("--out needs a directory") != std::string::npos);
}

TEST_CASE("RasWritesWhyNothingWasAskedOfAProcessWithoutNccl") {
  char tmpl[] = "/tmp/ras-command-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string job = tmpl;
  const std::string pid = std::to_string(::getpid());  // this test: no NCCL mapped
  hangwatch::forensics::RasCommand command;
  CHECK(command.run({"--pid", pid, "--rank", "3", "--out", job}) == 1);
  std::ifstream in(hangwatch::rasAnswerPath(job, 3));
  std::stringstream text;
  text << in.rdbuf();
  auto answer = hangwatch::rasAnswerFromText(text.str());
  REQUIRE(answer.ok());
  CHECK(answer->rank == 3);
  CHECK(answer->pid == ::getpid());
  CHECK(answer->ras.asked_by == "ras-command");
  CHECK(answer->ras.error.find("no NCCL loaded") != std::string::npos);
  CHECK(answer->ras.communicators.empty());
  std::filesystem::remove_all(job);
}

TEST_CASE("CollectTakesTheNodesRanksAsRanges") {
  auto o = CollectCommand::parse(args({"--pid", "9", "--rank", "2", "--state", "--node", "0-3,8", "--out", "/d"}), nullptr);
  REQUIRE(o.ok());
  CHECK(o->node_ranks == std::vector<int>{0, 1, 2, 3, 8});
  auto plain = CollectCommand::parse(args({"--pid", "9", "--rank", "2", "--state", "--node=3,1-2,2", "--out", "/d"}), nullptr);
  REQUIRE(plain.ok());
  CHECK(plain->node_ranks == std::vector<int>{1, 2, 3});
}

TEST_CASE("TheNodesLastCollectorWritesItsSummary") {
  char tmpl[] = "/tmp/node-summary-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto state = [&](int rank, hangwatch::DumpPhase phase) {
    hangwatch::RankState s;
    s.rank = rank;
    s.phase = phase;
    s.host = hangwatch::hostName();
    s.deadline_unix_s = 4e9;
    REQUIRE(hangwatch::writeFileAtomically(hangwatch::rankStatePath(dir, rank), hangwatch::toJson(s).dump()).ok());
  };
  state(0, hangwatch::DumpPhase::kDone);
  state(1, hangwatch::DumpPhase::kCollecting);
  std::ostringstream log;
  // Another collector of this node already waits: this one leaves the summary to it.
  const std::string claim = hangwatch::forensics::nodeSummaryWaiterClaim(dir, hangwatch::hostName());
  REQUIRE(hangwatch::writeFileAtomically(claim, "").ok());
  hangwatch::forensics::summarizeNodeAfterCollect(dir, {0, 1}, log);
  CHECK_FALSE(std::filesystem::exists(hangwatch::nodeSummaryPath(dir, hangwatch::hostName())));
  std::filesystem::remove(claim);
  // The last one: every rank done.
  state(1, hangwatch::DumpPhase::kDone);
  hangwatch::forensics::summarizeNodeAfterCollect(dir, {0, 1}, log);
  CHECK_THAT(log.str(), Catch::Contains("2 rank(s) covered"));
  auto summary = hangwatch::nodeSummaryFromText([&] {
    std::ifstream in(hangwatch::nodeSummaryPath(dir, hangwatch::hostName()));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }());
  REQUIRE(summary.ok());
  CHECK(summary->covers == std::vector<int>{0, 1});
  CHECK(summary->host == hangwatch::hostName());
  std::filesystem::remove_all(dir);
}

TEST_CASE("AutoBackendFollowsTheLibrariesInTheProcess") {
  using hangwatch::forensics::resolveBackend;
  CHECK(resolveBackend("auto", true, false) == "sim");
  CHECK(resolveBackend("auto", false, true) == "cuda");
  CHECK(resolveBackend("auto", false, false) == "host");
  CHECK(resolveBackend("host", true, true) == "host");
  CHECK(resolveBackend("cuda", true, false) == "cuda");
}

// simgpu's drop-in folder carries the real sonames (libcudart.so.13, libnccl.so.2): found by
// name only, a job on it looked like real NCCL and the debugger read NCCL's host structures,
// which simnccl does not have ("struct ncclComm has no field startMagic"): no ring progress.
TEST_CASE("SimgpuUnderTheRealSonamesIsToldByWhatItDefines") {
  using hangwatch::forensics::mapsSimgpu;
  using hangwatch::forensics::ProcMapping;
  using hangwatch::forensics::ProcSnapshot;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mapssimgpu-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path dropin = dir / "libcudart.so.13";
  fs::copy_file(SIMCUDA_LIBRARY, dropin, fs::copy_options::overwrite_existing);
  auto with = [](std::vector<std::string> paths) {
    ProcSnapshot p;
    for (auto& path : paths) {
      ProcMapping m;
      m.path = path;
      p.maps.push_back(m);
    }
    return p;
  };
  CHECK(mapsSimgpu(with({"/usr/lib/x86_64-linux-gnu/libc.so.6", dropin.string()})));
  CHECK(mapsSimgpu(with({"/opt/x/libsimnccl.so"})));
  CHECK_FALSE(mapsSimgpu(with({"/usr/lib/x86_64-linux-gnu/libc.so.6"})));
  if (fs::exists("/usr/local/cuda/lib64/libcudart.so.13"))
    CHECK_FALSE(mapsSimgpu(with({"/usr/local/cuda/lib64/libcudart.so.13"})));
  fs::remove_all(dir);
}
