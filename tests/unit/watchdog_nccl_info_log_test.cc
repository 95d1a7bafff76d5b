// Where NCCL's INFO lines naming each connection's NIC are written, and which the watchdog
// keeps (nccl_info_log.h): NCCL's own rules for NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
// NCCL_DEBUG_FILE (src/debug.cc, 2.28.9), the environment before NCCL's conf files.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "hangwatch/watchdog/nccl_info_log.h"

using namespace hangwatch::watchdog;
using hangwatch::EnvLookup;
using hangwatch::SnapshotNcclLog;
namespace fs = std::filesystem;

namespace {

struct NcclLogEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

fs::path ncclLogScratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("hangwatch-nccl-info-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string envSetting(const NcclInfoLogChoice& c, const std::string& name) {
  for (const auto& [n, v] : c.set_env)
    if (n == name) return v;
  return "<unset>";
}

}  // namespace

TEST_CASE("AJobThatLeavesNcclDebugUnsetGetsInfoOnInitAndNetIntoANodeLocalFile") {
  const fs::path node = ncclLogScratch("unset") / "nccl-info";  // made here
  NcclInfoLogChoice c = chooseNcclInfoLog(NcclLogEnv{}.lookup(), {}, node.string(), "/work");
  CHECK(fs::is_directory(node));
  CHECK(c.owned);
  CHECK(c.unread.empty());
  CHECK(envSetting(c, "NCCL_DEBUG") == "INFO");
  CHECK(envSetting(c, "NCCL_DEBUG_SUBSYS") == "INIT,NET");
  CHECK(envSetting(c, "NCCL_DEBUG_FILE") == node.string() + "/nccl.%h.%p.log");
  CHECK(c.file_pattern == node.string() + "/nccl.%h.%p.log");
  // A process its parent's watchdog set this for (a launcher, a shell that execs the rank)
  // reads the same file, and it is still the watchdog's own.
  NcclLogEnv child;
  for (const auto& [name, value] : c.set_env) child.vars[name] = value;
  NcclInfoLogChoice inherited = chooseNcclInfoLog(child.lookup(), {}, node.string(), "/work");
  CHECK(inherited.set_env.empty());
  CHECK(inherited.owned);
  CHECK(inherited.file_pattern == c.file_pattern);
}

TEST_CASE("AJobsOwnNcclDebugIsKeptAndItsFileReadWhereItPrintsTheLines") {
  NcclLogEnv env;
  env.vars["NCCL_DEBUG"] = "info";
  env.vars["NCCL_DEBUG_FILE"] = "logs/nccl.%h.%p";
  NcclInfoLogChoice c = chooseNcclInfoLog(env.lookup(), {}, "/nonexistent/never-made", "/work/job");
  CHECK(c.set_env.empty());
  CHECK_FALSE(c.owned);
  CHECK(c.file_pattern == "/work/job/logs/nccl.%h.%p");  // relative to where NCCL opened it
  env.vars["NCCL_DEBUG_SUBSYS"] = "^INIT,NET";
  CHECK(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread == "NCCL_DEBUG_SUBSYS=^INIT,NET leaves out INIT and NET");
  env.vars["NCCL_DEBUG_SUBSYS"] = "^INIT";  // NET lines still print: each is INIT|NET
  CHECK(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread.empty());
  env.vars["NCCL_DEBUG_SUBSYS"] = "COLL,P2P";
  CHECK_FALSE(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread.empty());
  env.vars["NCCL_DEBUG_SUBSYS"] = "ALL";
  CHECK(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread.empty());
  env.vars.erase("NCCL_DEBUG_FILE");
  CHECK(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread ==
        "NCCL_DEBUG=info prints to the job's standard output (no NCCL_DEBUG_FILE)");
  env.vars["NCCL_DEBUG"] = "WARN";
  CHECK(chooseNcclInfoLog(env.lookup(), {}, "", "/").unread == "NCCL_DEBUG=WARN prints no INFO line");
  env.vars["HANGWATCH_NCCL_INFO"] = "0";
  env.vars.erase("NCCL_DEBUG");
  NcclInfoLogChoice off = chooseNcclInfoLog(env.lookup(), {}, ncclLogScratch("off").string(), "/");
  CHECK(off.set_env.empty());
  CHECK(off.unread == "HANGWATCH_NCCL_INFO=0");
}

TEST_CASE("NcclDebugSetInNcclsConfFileIsTheJobsChoiceToo") {
  const fs::path dir = ncclLogScratch("conf");
  std::ofstream(dir / "nccl.conf") << "NCCL_DEBUG=WARN\n";
  NcclInfoLogChoice c = chooseNcclInfoLog(NcclLogEnv{}.lookup(), {(dir / "nccl.conf").string()}, (dir / "n").string(), "/");
  CHECK(c.set_env.empty());
  CHECK(c.unread == "NCCL_DEBUG=WARN prints no INFO line");
}

TEST_CASE("ANodeDirectoryThatCannotBeMadeLeavesNcclAlone") {
  const fs::path dir = ncclLogScratch("file-in-the-way");
  std::ofstream(dir / "blocker") << "x";
  NcclInfoLogChoice c = chooseNcclInfoLog(NcclLogEnv{}.lookup(), {}, (dir / "blocker" / "nccl-info").string(), "/");
  CHECK(c.set_env.empty());  // NCCL would print to stdout when it cannot open the file
  CHECK(c.file_pattern.empty());
  CHECK(c.unread.find("could not be made") != std::string::npos);
}

TEST_CASE("NcclDebugFileExpandsAsNcclDoes") {
  CHECK(expandNcclDebugFile("/l/nccl.%h.%p", "node-3.cluster.example", 4242) == "/l/nccl.node-3.4242");
  CHECK(expandNcclDebugFile("/l/100%%-%x-%", "h", 1) == "/l/100%-%x-%");
}

TEST_CASE("OnlyThisProcesssLinesThatSayWhichNicAConnectionUsesAreKept") {
  const fs::path file = ncclLogScratch("read") / "nccl.log";
  std::ofstream(file)
      << "node-0:77:78 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n"
      << "node-0:77:78 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>\n"
      << "node-0:77:78 [0] NCCL INFO ncclCommInitRank comm 0x5581 rank 3 nranks 8 cudaDev 0 nvmlDev 3 busId 1b000 "
         "commId 0x1852e9190e780d2a - Init START\n"
      << "node-0:99:100 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] [send] via NET/IB/1\n"  // another process
      << "[2026-12-01 08:00:00] node-0:77:79 [0] NCCL INFO Channel 02/0 : 3[3] -> 4[0] [send] via NET/IB/3/GDRDMA\n"
      << "\nnode-0:77:78 [0] transport/net.cc:100 NCCL WARN something\n"
      << "node-0:77:79 [0] NCCL INFO Channel 02/0 : 2[2] -> 3[3] via P2P/CUMEM\n"  // inside the node
      << "node-0:77:79 [0] NCCL INFO Channel 02/0 : 4[0] -> 3[3] [receive] via NET/IB/3";  // no newline yet
  SnapshotNcclLog log = readNcclInfoLines(file.string(), 77);
  CHECK(log.file == file.string());
  REQUIRE(log.lines.size() == 3);
  CHECK(log.lines[0].find("NET/IB : Using [0]mlx5_0:1/IB") != std::string::npos);
  CHECK(log.lines[1].find("Init START") != std::string::npos);
  CHECK(log.lines[2].find("3[3] -> 4[0] [send] via NET/IB/3") != std::string::npos);
  CHECK_FALSE(log.truncated);
  // A file longer than the bound: what fits is read, and it says so.
  SnapshotNcclLog part = readNcclInfoLines(file.string(), 77, 200);
  CHECK(part.truncated);
  CHECK(part.lines.size() == 1);
  CHECK(readNcclInfoLines((file.parent_path() / "missing").string(), 77).unread.find("cannot read") == 0);
}
