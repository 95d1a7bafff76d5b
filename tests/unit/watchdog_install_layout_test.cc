#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "hangwatch/watchdog/collector_launcher.h"

using hangwatch::watchdog::CollectorLauncher;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/install_layout_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

void executable(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "#!/bin/sh\n";
  fs::permissions(p, fs::perms::owner_all);
}

}  // namespace

TEST_CASE("InstalledLibraryFindsTheCollectorOfItsOwnPrefixWhereverThePrefixWasMoved") {
  TempDir tmp;
  fs::path prefix = tmp.path / "moved" / "hangwatch";
  fs::create_directories(prefix / "lib");
  executable(prefix / "bin" / "forensics");
  CHECK(CollectorLauncher::forensicsNextTo((prefix / "lib").string()) == (prefix / "bin" / "forensics").string());
}

TEST_CASE("BuildTreeLibraryFindsTheBuildTreesCollector") {
  TempDir tmp;
  fs::create_directories(tmp.path / "watchdog");
  executable(tmp.path / "forensics" / "forensics");
  CHECK(CollectorLauncher::forensicsNextTo((tmp.path / "watchdog").string()) ==
        (tmp.path / "forensics" / "forensics").string());
}

TEST_CASE("LibraryWithoutACollectorBesideItFindsNone") {
  TempDir tmp;
  fs::create_directories(tmp.path / "lib");
  fs::create_directories(tmp.path / "bin");
  std::ofstream(tmp.path / "bin" / "forensics") << "not executable";
  CHECK(CollectorLauncher::forensicsNextTo((tmp.path / "lib").string()).empty());
}
