// The debugger phase's choices, made once from the process: which debugger a backend gets
// (and what is missing), and what the script is told ($HANGWATCH_PROBE).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hangwatch/forensics/debugger_session.h"
#include "hangwatch/forensics/probe_request.h"

using namespace hangwatch::forensics;

namespace {

// A PATH of one temporary folder holding fake executables with the given names.
class FakePath {
 public:
  explicit FakePath(std::initializer_list<const char*> tools) {
    char tmpl[] = "/tmp/debugger-choice-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    for (const char* t : tools) {
      std::string p = dir_ + "/" + t;
      std::ofstream(p) << "#!/bin/sh\nexit 0\n";
      ::chmod(p.c_str(), 0755);
    }
    const char* old = std::getenv("PATH");
    old_path_ = old ? old : "";
    ::setenv("PATH", dir_.c_str(), 1);
  }
  ~FakePath() {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::filesystem::remove_all(dir_);
  }
  std::string tool(const char* name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  std::string old_path_;
};

std::string writeSnapshot(const std::string& text) {
  char tmpl[] = "/tmp/probe-request-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::ofstream(dir + "/r00001.watchdog.json") << text;
  return dir + "/r00001.watchdog.json";
}

}  // namespace

TEST_CASE("TheCudaBackendGetsCudaGdbAndTheSimBackendGdb") {
  FakePath path({"gdb", "cuda-gdb"});
  auto cuda = DebuggerSession::locateFor("cuda", nullptr);
  REQUIRE(cuda.ok());
  CHECK(cuda->path == path.tool("cuda-gdb"));
  CHECK(cuda->cuda_gdb);
  CHECK(cuda->shortfall.empty());
  auto sim = DebuggerSession::locateFor("sim", nullptr);
  REQUIRE(sim.ok());
  CHECK(sim->path == path.tool("gdb"));  // cuda-gdb on PATH does not decide for a simgpu process
  CHECK_FALSE(sim->cuda_gdb);
}

TEST_CASE("TheCudaBackendWithoutCudaGdbRunsGdbAndSaysWhatIsNotRead") {
  FakePath path({"gdb"});
  auto cuda = DebuggerSession::locateFor("cuda", nullptr);
  REQUIRE(cuda.ok());
  CHECK(cuda->path == path.tool("gdb"));
  CHECK(cuda->shortfall.find("cuda-gdb is not on PATH") != std::string::npos);
  CHECK(cuda->shortfall.find("host structures only") != std::string::npos);
}

TEST_CASE("AMissingDebuggerIsAnErrorThatNamesTheBackendsDebugger") {
  FakePath path({});
  auto cuda = DebuggerSession::locateFor("cuda", nullptr);
  REQUIRE_FALSE(cuda.ok());
  CHECK(cuda.error().find("neither cuda-gdb nor gdb") != std::string::npos);
  auto sim = DebuggerSession::locateFor("sim", nullptr);
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.error().find("sim backend: gdb is not on PATH") != std::string::npos);
}

TEST_CASE("AConfiguredDebuggerWinsAndOnCudaAPlainGdbIsAShortfall") {
  FakePath path({"gdb", "cuda-gdb"});
  auto chosen = DebuggerSession::locateFor("cuda", "gdb");
  REQUIRE(chosen.ok());
  CHECK(chosen->path == path.tool("gdb"));
  CHECK(chosen->shortfall.find("HANGWATCH_DEBUGGER") != std::string::npos);
  CHECK_FALSE(DebuggerSession::locateFor("cuda", "/nonexistent/cuda-gdb").ok());
}

TEST_CASE("TheProbeRequestCarriesTheLiveCommunicatorsOfTheRanksSnapshot") {
  std::string path = writeSnapshot(R"({"identity": {"pid": 4242, "rank": 1},
    "comms": [{"hash": "57a76bac89a0c4ad", "rank": 1, "size": 4, "state": "live",
               "nccl_id": "2f6c1a0e9b7d4c31", "address": "0x55d0c0ffee00"},
              {"hash": "0000000000000001", "rank": 0, "size": 2, "state": "destroyed", "address": "0x55d0c0ffef00"},
              {"hash": "0000000000000002", "rank": 0, "size": 2, "state": "live", "address": ""}]})");
  ProbeRequest r = makeProbeRequest("cuda", true, path, 4242);
  REQUIRE(r.comms.size() == 1);
  CHECK(r.comms[0].address == "0x55d0c0ffee00");
  CHECK(r.comms[0].nccl_id == "2f6c1a0e9b7d4c31");
  CHECK(r.comms[0].hash == "57a76bac89a0c4ad");
  CHECK(r.comm_table.find("1 communicator(s), 2 destroyed, aborted or without an address left out") !=
        std::string::npos);
  nlohmann::json j = r.toJson();
  CHECK(j["backend"] == "cuda");
  CHECK(j["debugger"] == "cuda-gdb");
  CHECK(j["comms"][0]["address"] == "0x55d0c0ffee00");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST_CASE("ASnapshotOfAnotherProcessOrNoneGivesNoCommunicatorsAndSaysWhy") {
  std::string path = writeSnapshot(R"({"identity": {"pid": 99}, "comms": [{"hash": "ab", "address": "0x1000"}]})");
  ProbeRequest other = makeProbeRequest("cuda", false, path, 4242);
  CHECK(other.comms.empty());
  CHECK(other.comm_table.find("of pid 99, not 4242") != std::string::npos);
  ProbeRequest none = makeProbeRequest("cuda", false, path + ".missing", 4242);
  CHECK(none.comms.empty());
  CHECK(none.comm_table.find("not there") != std::string::npos);
  ProbeRequest sim = makeProbeRequest("sim", false, path, 99);
  CHECK(sim.comms.empty());  // the sim reader finds communicators from its wait frames
  CHECK(sim.toJson()["debugger"] == "gdb");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

namespace {

// An empty folder standing in for $TMPDIR, removed afterwards.
struct TmpDir {
  TmpDir() {
    char tmpl[] = "/tmp/index-cache-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TmpDir() { std::filesystem::remove_all(path); }
  std::string cacheName() const { return path + "/hangwatch-gdb-index-" + std::to_string(::geteuid()); }
  std::string path;
};

}  // namespace

TEST_CASE("TheDebuggersIndexCacheIsThisUsersOwnFolderUnderTmpdir") {
  TmpDir tmp;
  auto dir = DebuggerSession::indexCacheDir(tmp.path.c_str(), true);
  REQUIRE(dir);
  CHECK(*dir == tmp.cacheName());
  struct stat st {};
  REQUIRE(::lstat(dir->c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 0777) == 0700);
  // Made once: the next collection finds it and keeps what is in it.
  std::ofstream(*dir + "/0123.gdb-index") << "x";
  CHECK(DebuggerSession::indexCacheDir(tmp.path.c_str(), true) == dir);
  CHECK(std::filesystem::exists(*dir + "/0123.gdb-index"));
  auto commands = DebuggerSession::indexCacheCommands(*dir);
  CHECK(commands == std::vector<std::string>{"set index-cache directory " + *dir, "set index-cache enabled on"});
}

TEST_CASE("OnlyTheNodesFirstRankFillsTheIndexCacheTheOthersUseItOnceItHoldsSomething") {
  TmpDir tmp;
  // The node's other ranks, at the first hang: no folder, and none made.
  CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), false));
  CHECK_FALSE(std::filesystem::exists(tmp.cacheName()));
  // The first rank's debugger has made it and not written yet.
  REQUIRE(DebuggerSession::indexCacheDir(tmp.path.c_str(), true));
  CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), false));
  // Its index written: every rank's debugger reads it.
  std::ofstream(tmp.cacheName() + "/0123.gdb-index") << "x";
  CHECK(DebuggerSession::indexCacheDir(tmp.path.c_str(), false) == tmp.cacheName());
}

TEST_CASE("WithoutAnAbsoluteTmpdirTheIndexCacheIsUnderVarTmp") {
  auto dir = DebuggerSession::indexCacheDir(nullptr, true);
  if (dir) CHECK(*dir == "/var/tmp/hangwatch-gdb-index-" + std::to_string(::geteuid()));
  CHECK(DebuggerSession::indexCacheDir("relative/tmp", true) == dir);
  CHECK(DebuggerSession::indexCacheDir("", true) == dir);
}

TEST_CASE("AnIndexCacheFolderSomeoneElseCouldPlantAnIndexInIsNotUsed") {
  TmpDir tmp;
  std::string name = tmp.cacheName();
  SECTION("writable by others") {
    REQUIRE(::mkdir(name.c_str(), 0700) == 0);
    REQUIRE(::chmod(name.c_str(), 0777) == 0);
    std::ofstream(name + "/0123.gdb-index") << "x";
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), true));
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), false));
  }
  SECTION("a link to a folder") {
    std::filesystem::create_directory(tmp.path + "/elsewhere");
    std::ofstream(tmp.path + "/elsewhere/0123.gdb-index") << "x";
    std::filesystem::create_directory_symlink(tmp.path + "/elsewhere", name);
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), true));
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), false));
  }
  SECTION("a file") {
    std::ofstream(name) << "x";
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), true));
  }
  SECTION("another user's") {
    if (::geteuid() != 0) {
      WARN("not checked: giving the folder away needs root");
      return;
    }
    REQUIRE(::mkdir(name.c_str(), 0700) == 0);
    std::ofstream(name + "/0123.gdb-index") << "x";
    REQUIRE(::chown(name.c_str(), 65534, 65534) == 0);
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), true));
    CHECK_FALSE(DebuggerSession::indexCacheDir(tmp.path.c_str(), false));
  }
}
