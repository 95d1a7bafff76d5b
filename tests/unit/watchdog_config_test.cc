#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "hangwatch/watchdog/watchdog_config.h"
#include "test_env.h"

using namespace hangwatch::watchdog;

using test_support::envOf;


TEST_CASE("WatchdogConfigReadsTheContractVariables") {
  std::string warnings;
  WatchdogConfig c = watchdogConfigFromEnv(envOf({{"HANGWATCH_TIMEOUT", "2.5"},
                                                  {"HANGWATCH_ON_HANG", "abort"},
                                                  {"HANGWATCH_COLLECT", "0"},
                                                  {"HANGWATCH_METRICS_INTERVAL", "3"},
                                                  {"HANGWATCH_DUMP_DIR", "/d"},
                                                  {"HANGWATCH_JOB_ID", "j"},
                                                  {"HANGWATCH_KERNEL_SAMPLE", "0"},
                                                  {"HANGWATCH_ABORT_GRACE", "45"},
                                                  {"HANGWATCH_PROMETHEUS_DIR", "/var/lib/node-exporter"}}),
                                           &warnings);
  CHECK(warnings.empty());
  CHECK(c.timeoutNs() == 2'500'000'000);
  CHECK(c.on_hang == OnHang::kAbort);
  CHECK_FALSE(c.collect);
  CHECK(c.metrics_interval_s == 3);
  CHECK(c.job_dir == "/d/j");
  CHECK(c.kernel_sample == 0);
  CHECK(c.abort_grace_s == 45);
  CHECK(c.prometheus_dir == "/var/lib/node-exporter");
  CHECK(watchdogConfigFromEnv(envOf({}), nullptr).prometheus_dir.empty());
  CHECK_FALSE(c.disabled);
  CHECK(watchdogConfigFromEnv(envOf({{"HANGWATCH_DISABLE", "1"}}), nullptr).disabled);
  CHECK(watchdogConfigFromEnv(envOf({}), nullptr).node_summary);
  CHECK_FALSE(watchdogConfigFromEnv(envOf({{"HANGWATCH_NODE_SUMMARY", "0"}}), nullptr).node_summary);
  CHECK(watchdogConfigFromEnv(envOf({}), nullptr).ask_ras);
  CHECK_FALSE(watchdogConfigFromEnv(envOf({{"HANGWATCH_ASK_RAS", "0"}}), nullptr).ask_ras);
}

TEST_CASE("MalformedWatchdogVariablesKeepTheDefaultsAndSayWhich") {
  std::string warnings;
  WatchdogConfig c = watchdogConfigFromEnv(
      envOf({{"HANGWATCH_TIMEOUT", "soon"}, {"HANGWATCH_ON_HANG", "explode"}, {"HANGWATCH_METRICS_INTERVAL", "-1"},
             {"HANGWATCH_ABORT_GRACE", "0"}}),
      &warnings);
  CHECK(c.timeout_s == 300);
  CHECK(c.on_hang == OnHang::kWait);
  CHECK(c.metrics_interval_s == 10);
  CHECK(c.abort_grace_s == 120);
  CHECK(warnings.find("HANGWATCH_ABORT_GRACE=0") != std::string::npos);
  CHECK(warnings.find("HANGWATCH_TIMEOUT=soon") != std::string::npos);
  CHECK(warnings.find("HANGWATCH_ON_HANG=explode") != std::string::npos);
  CHECK(warnings.find("HANGWATCH_METRICS_INTERVAL=-1") != std::string::npos);
}

TEST_CASE("WatchdogConfigReadsTheStorageDeadlineAndTheFallbackFolderOfTheJob") {
  std::string warnings;
  WatchdogConfig c = watchdogConfigFromEnv(envOf({{"HANGWATCH_DUMP_DIR", "/lustre/dumps/"},
                                                  {"HANGWATCH_JOB_ID", "j7"},
                                                  {"HANGWATCH_STORAGE_DEADLINE", "2.5"},
                                                  {"HANGWATCH_FALLBACK_DIR", "/scratch/hw"}}),
                                           &warnings);
  CHECK(warnings.empty());
  CHECK(c.storage_deadline_s == 2.5);
  CHECK(c.fallback_root == "/scratch/hw");
  CHECK(c.fallbackJobDir() == "/scratch/hw/j7");
  WatchdogConfig d = watchdogConfigFromEnv(envOf({{"HANGWATCH_STORAGE_DEADLINE", "0"}}), &warnings);
  CHECK(d.storage_deadline_s == 10);
  CHECK(warnings.find("HANGWATCH_STORAGE_DEADLINE=0") != std::string::npos);
  CHECK(d.fallback_root == "/var/tmp/hangwatch-fallback");
}
