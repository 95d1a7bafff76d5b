#include <catch2/catch.hpp>

#include "hangwatch/forensics/cli/collect_command.h"

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
}

TEST_CASE("AutoBackendFollowsTheLibrariesInTheProcess") {
  using hangwatch::forensics::resolveBackend;
  CHECK(resolveBackend("auto", true, false) == "sim");
  CHECK(resolveBackend("auto", false, true) == "cuda");
  CHECK(resolveBackend("auto", false, false) == "host");
  CHECK(resolveBackend("host", true, true) == "host");
  CHECK(resolveBackend("cuda", true, false) == "cuda");
}
