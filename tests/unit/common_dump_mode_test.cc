// HANGWATCH_DUMP_MODE (common/dump_mode.h): dumps on shared storage are group-readable, not
// world-readable, whatever the umask; folders get search permission where reading is allowed.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/trigger_beacon.h"
#include "test_env.h"

using namespace hangwatch;
namespace fs = std::filesystem;

using test_support::TempDir;

namespace {

mode_t modeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

// Sets HANGWATCH_DUMP_MODE as the process sees it for one test, and the umask; restores both.
struct DumpModeScope {
  mode_t old_umask;
  explicit DumpModeScope(const char* mode, mode_t umask_value = 022) : old_umask(::umask(umask_value)) {
    std::string m = mode ? mode : "";
    setDumpModeFromEnv([m](const char* name) -> const char* {
      return std::string(name) == "HANGWATCH_DUMP_MODE" && !m.empty() ? m.c_str() : nullptr;
    });
  }
  ~DumpModeScope() {
    ::umask(old_umask);
    setDumpModeFromEnv([](const char*) -> const char* { return nullptr; });
  }
};

}  // namespace

TEST_CASE("DumpModeParsesOctalPermissionBitsOnly") {
  CHECK(*parseDumpMode("0640") == 0640);
  CHECK(*parseDumpMode("660") == 0660);
  CHECK(*parseDumpMode("0600") == 0600);
  CHECK_FALSE(parseDumpMode("").ok());
  CHECK_FALSE(parseDumpMode("rw-r-----").ok());
  CHECK_FALSE(parseDumpMode("0999").ok());
  CHECK_FALSE(parseDumpMode("4755").ok());
  CHECK_FALSE(parseDumpMode("0440").ok());  // the writer must be able to rewrite its own dumps
}

TEST_CASE("DumpsAndTheirFoldersAreGroupReadableNotWorldReadableByDefault") {
  DumpModeScope scope(nullptr, 0);  // even a umask that takes nothing away
  TempDir dir;
  const std::string file = dir.path + "/job/ranks/r00001.watchdog.json";
  REQUIRE(writeFileAtomically(file, "{}").ok());
  CHECK(modeOf(file) == 0640);
  CHECK(modeOf(dir.path + "/job/ranks") == 0750);
  CHECK(modeOf(dir.path + "/job") == 0750);
  REQUIRE(createFileExclusively(dir.path + "/job/TRIGGER.json", "{}").ok());
  CHECK(modeOf(dir.path + "/job/TRIGGER.json") == 0640);
  REQUIRE(TriggerBeacon(dir.path + "/job").append("triggered").ok());
  CHECK(modeOf(dir.path + "/job/TRIGGER.beacon") == 0640);
}

TEST_CASE("TheModeHangwatchDumpModeAsksForWinsOverTheUmask") {
  DumpModeScope scope("0660", 077);
  TempDir dir;
  const std::string file = dir.path + "/job/report/report.json";
  REQUIRE(writeFileAtomically(file, "{}").ok());
  CHECK(modeOf(file) == 0660);
  CHECK(modeOf(dir.path + "/job/report") == 0770);
}

TEST_CASE("AMalformedDumpModeKeepsTheDefaultAndSaysWhy") {
  std::string warning;
  setDumpModeFromEnv([](const char* n) -> const char* { return std::string(n) == "HANGWATCH_DUMP_MODE" ? "07777" : nullptr; },
                     &warning);
  CHECK(dumpFileMode() == 0640);
  CHECK(warning.find("HANGWATCH_DUMP_MODE=07777") != std::string::npos);
  setDumpModeFromEnv([](const char*) -> const char* { return nullptr; });
}
