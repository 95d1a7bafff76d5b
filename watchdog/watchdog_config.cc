#include "hangwatch/watchdog/watchdog_config.h"

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/watchdog/dump_storage.h"

namespace hangwatch::watchdog {
namespace {

bool parsePositive(const char* text, double* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0)) return false;
  *out = v;
  return true;
}

}  // namespace

WatchdogConfig watchdogConfigFromEnv(const EnvLookup& env_in, std::string* warnings) {
  EnvLookup env = env_in ? env_in : EnvLookup([](const char* n) { return std::getenv(n); });
  auto warn = [&](const std::string& w) {
    if (warnings) *warnings += (warnings->empty() ? "" : "; ") + w;
  };
  WatchdogConfig c;
  if (const char* v = env("HANGWATCH_DISABLE"); v && std::string_view(v) == "1") c.disabled = true;
  if (const char* v = env("HANGWATCH_TIMEOUT"); v && !parsePositive(v, &c.timeout_s))
    warn(std::string("HANGWATCH_TIMEOUT=") + v + " is not a positive number of seconds");
  if (const char* v = env("HANGWATCH_WARN_AFTER")) {
    char* end = nullptr;
    double w = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(w >= 0))
      warn(std::string("HANGWATCH_WARN_AFTER=") + v + " is not a number of seconds (0: off)");
    else
      c.warn_after_s = w;
  }
  if (const char* v = env("HANGWATCH_ON_HANG")) {
    if (std::string_view(v) == "abort")
      c.on_hang = OnHang::kAbort;
    else if (std::string_view(v) != "wait")
      warn(std::string("HANGWATCH_ON_HANG=") + v + " is neither wait nor abort");
  }
  if (const char* v = env("HANGWATCH_COLLECT"); v && std::string_view(v) == "0") c.collect = false;
  if (const char* v = env("HANGWATCH_NODE_SUMMARY"); v && std::string_view(v) == "0") c.node_summary = false;
  if (const char* v = env("HANGWATCH_ASK_RAS"); v && std::string_view(v) == "0") c.ask_ras = false;
  if (const char* v = env("HANGWATCH_METRICS_INTERVAL"); v && !parsePositive(v, &c.metrics_interval_s))
    warn(std::string("HANGWATCH_METRICS_INTERVAL=") + v + " is not a positive number of seconds");
  if (const char* v = env("HANGWATCH_FORENSICS")) c.forensics_binary = v;
  if (const char* v = env("HANGWATCH_DEBUGGER")) c.debugger = v;
  if (const char* v = env("HANGWATCH_KERNEL_SAMPLE")) {
    char* end = nullptr;
    unsigned long n = std::strtoul(v, &end, 10);
    if (end == v || *end != '\0')
      warn(std::string("HANGWATCH_KERNEL_SAMPLE=") + v + " is not a count");
    else
      c.kernel_sample = static_cast<uint32_t>(n);
  }
  if (const char* v = env("HANGWATCH_COLLECT_WAIT"); v && !parsePositive(v, &c.collect_wait_s))
    warn(std::string("HANGWATCH_COLLECT_WAIT=") + v + " is not a positive number of seconds");
  if (const char* v = env("HANGWATCH_ABORT_GRACE"); v && !parsePositive(v, &c.abort_grace_s))
    warn(std::string("HANGWATCH_ABORT_GRACE=") + v + " is not a positive number of seconds");
  if (const char* v = env("HANGWATCH_PROMETHEUS_DIR")) c.prometheus_dir = v;
  if (const char* v = env("HANGWATCH_STORAGE_DEADLINE"); v && !parsePositive(v, &c.storage_deadline_s))
    warn(std::string("HANGWATCH_STORAGE_DEADLINE=") + v + " is not a positive number of seconds");
  if (const char* v = env("HANGWATCH_IO_HELPER"); v && std::string_view(v) == "0") c.io_helper = false;
  c.fallback_root = fallbackRootFromEnv(env);
  std::string mode_warning;
  setDumpModeFromEnv(env, &mode_warning);
  if (!mode_warning.empty()) warn(mode_warning);
  c.job_dir = jobDirFromEnv(env);
  return c;
}

std::string WatchdogConfig::fallbackJobDir() const {
  std::filesystem::path job = std::filesystem::path(job_dir).lexically_normal();
  if (job.filename().empty()) job = job.parent_path();
  return fallback_root + "/" + job.filename().string();
}

}  // namespace hangwatch::watchdog
