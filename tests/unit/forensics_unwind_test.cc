#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hangwatch/forensics/collector.h"

extern "C" void outer_without_cfi(int fd);

using namespace hangwatch::forensics;

namespace {

char procState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

}  // namespace

// Why the collector needs no second unwinder (libunwind) for code without .eh_frame:
// libdwfl falls back to the frame-pointer chain on x86-64.
TEST_CASE("CollectorUnwindsThroughFunctionsThatHaveNoCfi") {
  int release[2];
  REQUIRE(pipe(release) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(release[1]);
    outer_without_cfi(release[0]);
    _exit(0);
  }
  close(release[0]);
  for (int i = 0; i < 500 && procState(pid) != 'S'; ++i) usleep(10'000);
  usleep(50'000);  // the read() in leaf_without_cfi, not the way there

  CollectOptions o;
  o.pid = pid;
  o.out_dir = (std::filesystem::temp_directory_path() / ("forensics-unwind-" + std::to_string(getpid()))).string();
  o.backend = "host";
  CollectResult r = Collector(o).run();
  INFO(r.summary);
  CHECK(r.exit_code == kCollectOk);
  REQUIRE(r.dump.threads.size() == 1);
  std::vector<std::string> names;
  for (const auto& f : r.dump.threads.front().frames) names.push_back(f.function);
  INFO(Catch::Detail::stringify(names));
  auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  const auto leaf = at("leaf_without_cfi"), middle = at("middle_without_cfi"), outer = at("outer_without_cfi");
  CHECK(leaf < static_cast<long>(names.size()));
  CHECK(middle == leaf + 1);
  CHECK(outer == middle + 1);
  CHECK(outer + 1 < static_cast<long>(names.size()));  // and on into this test's frames

  close(release[1]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  std::filesystem::remove_all(o.out_dir);
}
