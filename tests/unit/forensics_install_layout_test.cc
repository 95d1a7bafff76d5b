#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "hangwatch/forensics/debugger_session.h"

using hangwatch::forensics::DebuggerSession;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/scripts_layout_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("InstalledCollectorTakesTheScriptsOfItsOwnPrefix") {
  TempDir tmp;
  fs::path prefix = tmp.path / "anywhere";
  fs::path scripts = prefix / "share" / "hangwatch" / "gdb-scripts";
  fs::create_directories(scripts);
  std::ofstream(scripts / "collector_probe.py") << "";
  CHECK(DebuggerSession::scriptsDirFor((prefix / "bin" / "forensics").string()) == scripts.string());
}

TEST_CASE("BuildTreeCollectorTakesTheSourceTreesScripts") {
  TempDir tmp;
  fs::create_directories(tmp.path / "forensics");
  std::string dir = DebuggerSession::scriptsDirFor((tmp.path / "forensics" / "forensics").string());
  CHECK(fs::exists(fs::path(dir) / "collector_probe.py"));
  CHECK(dir.find(tmp.path.string()) == std::string::npos);
  CHECK(DebuggerSession::scriptsDirFor("") == dir);
}

TEST_CASE("GdbScriptsVariableOverridesWhereTheScriptsAre") {
  ::setenv("HANGWATCH_GDB_SCRIPTS", "/elsewhere", 1);
  CHECK(DebuggerSession::scriptPath("collector_probe.py") == "/elsewhere/collector_probe.py");
  ::unsetenv("HANGWATCH_GDB_SCRIPTS");
  CHECK(DebuggerSession::scriptPath("collector_probe.py") ==
        DebuggerSession::scriptsDirFor(fs::read_symlink("/proc/self/exe").string()) + "/collector_probe.py");
}
