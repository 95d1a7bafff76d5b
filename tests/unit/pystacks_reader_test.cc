#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>
#include <set>
#include <string>

#include "pystacks_targets/target_process.h"
#include "hangwatch/forensics/python/python_stacks.h"

using hangwatch::forensics::PythonProcessStacks;
using hangwatch::forensics::readPythonStacks;
using hangwatch::stackmerge::PythonThreadStack;
using pystacks_test::TargetProcess;

namespace {

const std::string kScript = std::string(PYSTACKS_TARGETS_DIR) + "/blocked_threads.py";

const PythonThreadStack* threadWithFunction(const PythonProcessStacks& stacks, const std::string& function) {
  for (const auto& t : stacks.threads)
    for (const auto& f : t.frames)
      if (f.function == function) return &t;
  return nullptr;
}

std::set<int64_t> osThreadIds(pid_t pid) {
  std::set<int64_t> tids;
  if (auto* dir = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
    while (auto* e = readdir(dir))
      if (e->d_name[0] != '.') tids.insert(std::stoll(e->d_name));
    closedir(dir);
  }
  return tids;
}

// Frames of the target script, innermost first, as "function:line".
std::vector<std::string> scriptFrames(const PythonThreadStack& t) {
  std::vector<std::string> out;
  for (const auto& f : t.frames)
    if (f.file == kScript) out.push_back(f.function + ":" + std::to_string(f.line.value_or(-1)));
  return out;
}

std::string at(const std::string& function, const std::string& mark) {
  return function + ":" + std::to_string(pystacks_test::markedLine(kScript, mark));
}

// Stops the target and reads it; retries a few times in case a thread had not reached its wait yet.
PythonProcessStacks readStopped(TargetProcess& target, size_t want_threads) {
  PythonProcessStacks stacks;
  for (int attempt = 0; attempt < 20; ++attempt) {
    REQUIRE(target.stop());
    auto read = readPythonStacks(target.pid());
    INFO((read ? std::string() : read.error()));
    REQUIRE(read.ok());
    REQUIRE(read->has_value());
    stacks = **read;
    const auto* loader = threadWithFunction(stacks, "consume");
    const auto* main_thread = threadWithFunction(stacks, "inner");
    if (stacks.threads.size() == want_threads && loader && loader->frames.front().function == "wait" && main_thread &&
        main_thread->frames.front().function == "inner")
      break;
    target.resume();
    usleep(100 * 1000);
  }
  return stacks;
}

void checkBlockedThreads(int minor) {
  const auto interpreters = pystacks_test::interpretersFor(minor);
  if (interpreters.empty()) {
    WARN("SKIPPED: no Python 3." << minor << " installed");
    return;
  }
  for (const auto& python : interpreters) {
    INFO("interpreter " << python);
    TargetProcess target({python, kScript});
    REQUIRE(target.waitFor("ready", std::chrono::seconds(20)));
    const PythonProcessStacks stacks = readStopped(target, 2);

    CHECK(stacks.version.rfind("3." + std::to_string(minor), 0) == 0);
    REQUIRE(stacks.threads.size() == 2);

    const PythonThreadStack* main_thread = threadWithFunction(stacks, "outer");
    REQUIRE(main_thread != nullptr);
    CHECK(scriptFrames(*main_thread) ==
          std::vector<std::string>{at("inner", "inner"), at("outer", "outer"), at("main", "main"), at("<module>", "module")});
    // lock.acquire is C: the innermost Python frame is the one calling it.
    CHECK(main_thread->frames.size() == 4);
    CHECK(main_thread->name == "MainThread");

    const PythonThreadStack* loader = threadWithFunction(stacks, "consume");
    REQUIRE(loader != nullptr);
    CHECK(loader->name == "dataloader");
    CHECK(scriptFrames(*loader) == std::vector<std::string>{at("consume", "consume"), at("run", "run")});
    CHECK(loader->frames.front().function == "wait");
    CHECK(loader->frames.front().file.find("threading.py") != std::string::npos);
    CHECK(loader->frames.back().function == "_bootstrap");

    for (const auto* t : {main_thread, loader}) {
      CHECK(t->pthread_id != 0);
      CHECK(std::accumulate(t->eval_group_sizes.begin(), t->eval_group_sizes.end(), size_t{0}) == t->frames.size());
      if (minor >= 11) {
        REQUIRE(t->native_tid.has_value());
        CHECK(osThreadIds(target.pid()).count(*t->native_tid) == 1);
      } else {
        CHECK_FALSE(t->native_tid.has_value());
      }
    }
    CHECK(main_thread->native_tid.value_or(target.pid()) == target.pid());
    // 3.10 evaluates each frame in its own C activation; 3.11+ runs nested Python calls inline.
    if (minor == 10) {
      CHECK(main_thread->eval_group_sizes == std::vector<size_t>(4, 1));
    } else {
      CHECK(main_thread->eval_group_sizes == std::vector<size_t>{4});
      CHECK(loader->eval_group_sizes.size() == 1);
    }
  }
}

}  // namespace

TEST_CASE("ReadsDataloaderAndNestedMainThreadOnPython310") { checkBlockedThreads(10); }
TEST_CASE("ReadsDataloaderAndNestedMainThreadOnPython311") { checkBlockedThreads(11); }
TEST_CASE("ReadsDataloaderAndNestedMainThreadOnPython312") { checkBlockedThreads(12); }
TEST_CASE("ReadsDataloaderAndNestedMainThreadOnPython313") { checkBlockedThreads(13); }

TEST_CASE("ReadsEveryThreadOfATenThreadProcess") {
  for (int minor : {12, 11, 13, 10}) {
    const auto interpreters = pystacks_test::interpretersFor(minor);
    if (interpreters.empty()) continue;
    TargetProcess target({interpreters.front(), kScript, "8"});
    REQUIRE(target.waitFor("ready", std::chrono::seconds(20)));
    const PythonProcessStacks stacks = readStopped(target, 10);
    REQUIRE(stacks.threads.size() == 10);
    std::set<std::string> names;
    for (const auto& t : stacks.threads) names.insert(t.name);
    for (int i = 0; i < 8; ++i) CHECK(names.count("idle-" + std::to_string(i)) == 1);
    size_t idle_threads = 0;
    for (const auto& t : stacks.threads)
      for (const auto& f : t.frames) idle_threads += f.function == "idle" && f.file == kScript;
    CHECK(idle_threads == 8);
    return;
  }
  WARN("SKIPPED: no Python 3.10-3.13 installed");
}

TEST_CASE("ProcessWithoutPythonGivesNoStacks") {
  TargetProcess target({"/bin/sh", "-c", "echo ready; exec sleep 30"});
  REQUIRE(target.waitFor("ready", std::chrono::seconds(10)));
  usleep(50 * 1000);  // let exec replace the shell
  auto read = readPythonStacks(target.pid());
  INFO((read ? std::string() : read.error()));
  REQUIRE(read.ok());
  CHECK_FALSE(read->has_value());
}

TEST_CASE("ExitedProcessGivesAnError") {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  waitpid(child, nullptr, 0);
  auto read = readPythonStacks(child);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().find(std::to_string(child)) != std::string::npos);
}
