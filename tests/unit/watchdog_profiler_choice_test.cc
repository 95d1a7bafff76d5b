// Which profiler plugin NCCL would load for the job, and whether hangwatch takes its
// place (profiler_plugin_choice.h), following NCCL's environment and conf-file rules.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "hangwatch/watchdog/profiler_plugin_choice.h"

using namespace hangwatch::watchdog;
using hangwatch::EnvLookup;
using hangwatch::ncclConfFiles;
namespace fs = std::filesystem;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string confFile(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("hangwatch-conf-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

const std::string kOwn = "/opt/hangwatch/lib/libhangwatch.so";

}  // namespace

TEST_CASE("WithNoProfilerAnywhereHangwatchOffersItselfInFrontOfNcclsDefault") {
  FakeEnv env;
  auto c = chooseProfilerPlugin(env.lookup(), kOwn, {});
  CHECK(c.offer_hangwatch);
  REQUIRE(c.job_plugin);
  CHECK(*c.job_plugin == "");  // NCCL's default libnccl-profiler.so, if there is one
}

TEST_CASE("TheJobsProfilerFromTheEnvironmentIsKeptBehindHangwatch") {
  FakeEnv env;
  env.vars["NCCL_PROFILER_PLUGIN"] = "inspector";
  const std::string conf = confFile("env.conf", "NCCL_PROFILER_PLUGIN=other\n");
  auto c = chooseProfilerPlugin(env.lookup(), kOwn, {conf});
  CHECK(c.offer_hangwatch);
  CHECK(c.job_plugin.value_or("?") == "inspector");  // the environment wins over conf files
}

TEST_CASE("AProfilerNamedOnlyInAnNcclConfFileIsKeptBehindHangwatch") {
  FakeEnv env;
  const std::string user = confFile("user.conf", "# site defaults\nNCCL_DEBUG=WARN\nNCCL_PROFILER_PLUGIN=/site/libprof.so\n");
  const std::string etc = confFile("etc.conf", "NCCL_PROFILER_PLUGIN=/etc/libother.so\n");
  auto c = chooseProfilerPlugin(env.lookup(), kOwn, {user, etc});
  CHECK(c.offer_hangwatch);
  CHECK(c.job_plugin.value_or("?") == "/site/libprof.so");  // the user's file before /etc
  const std::string only_etc = confFile("empty.conf", "NCCL_DEBUG=INFO\n");
  CHECK(chooseProfilerPlugin(env.lookup(), kOwn, {only_etc, etc}).job_plugin.value_or("?") == "/etc/libother.so");
}

TEST_CASE("NcclConfFilesAreTheUsersOrNcclConfFileThenEtc") {
  FakeEnv env;
  env.vars["NCCL_CONF_FILE"] = "/cluster/nccl.conf";
  auto files = ncclConfFiles(env.lookup());
  REQUIRE(files.size() == 2);
  CHECK(files[0] == "/cluster/nccl.conf");
  CHECK(files[1] == "/etc/nccl.conf");
  FakeEnv plain;
  files = ncclConfFiles(plain.lookup());
  REQUIRE(files.size() == 2);
  CHECK(files[0].size() > std::string("/.nccl.conf").size());
  CHECK(files[0].substr(files[0].size() - 11) == "/.nccl.conf");
}

TEST_CASE("AJobThatTurnedProfilingOffOrOptedOutKeepsItsChoice") {
  FakeEnv none;
  none.vars["NCCL_PROFILER_PLUGIN"] = "NONE";
  CHECK_FALSE(chooseProfilerPlugin(none.lookup(), kOwn, {}).offer_hangwatch);
  FakeEnv opted_out;
  opted_out.vars["HANGWATCH_LINK_PROFILER"] = "0";
  CHECK_FALSE(chooseProfilerPlugin(opted_out.lookup(), kOwn, {}).offer_hangwatch);
  FakeEnv disabled;
  disabled.vars["HANGWATCH_DISABLE"] = "1";
  CHECK_FALSE(chooseProfilerPlugin(disabled.lookup(), kOwn, {}).offer_hangwatch);
}

TEST_CASE("AChildThatInheritedHangwatchAsThePluginKeepsTheJobsChoiceItWasHanded") {
  FakeEnv env;
  env.vars["NCCL_PROFILER_PLUGIN"] = kOwn;
  auto c = chooseProfilerPlugin(env.lookup(), kOwn, {});
  CHECK(c.offer_hangwatch);
  CHECK_FALSE(c.job_plugin);  // leave HANGWATCH_JOB_PROFILER_PLUGIN as the parent set it
}
