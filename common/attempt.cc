#include "hangwatch/common/attempt.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxNamesPerKey = 1000;

std::optional<int> count(const char* text) {
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1'000'000) return std::nullopt;
  return static_cast<int>(v);
}

// A key becomes a folder name: one safe path component.
std::string safeName(std::string s) {
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.';
    if (!ok) c = '_';
  }
  if (s.empty() || s[0] == '.') s.insert(0, "_");
  return s;
}

// A record of the dump folder: through the calling thread's file system (dump_fs.h).
constexpr size_t kMaxRecordBytes = 4 << 20;

std::optional<std::string> readRecordText(const std::string& path) {
  Expected<std::string> text = dumpFs().read(path, kMaxRecordBytes, /*create=*/false, 0);
  if (!text) return std::nullopt;
  return std::move(*text);
}

std::optional<std::string> readProcText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<AttemptRecord> parseRecord(const std::string& dir) {
  std::optional<std::string> text = readRecordText(attemptRecordPath(dir));
  if (!text) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  Expected<AttemptRecord> r = attemptFromJson(j);
  if (!r) return std::nullopt;
  return std::move(*r);
}

bool exists(const std::string& path) { return dumpFs().stat(path).has_value(); }

// One look at a folder's record: there and readable, there and unreadable (damaged), or
// not there. A record is linked in whole, so "unreadable" is decided by a second read.
struct RecordLook {
  std::optional<AttemptRecord> record;
  bool unreadable = false;
};

RecordLook lookAtRecord(const std::string& dir) {
  RecordLook look{parseRecord(dir)};
  if (!look.record && exists(attemptRecordPath(dir))) {
    look.record = parseRecord(dir);
    look.unreadable = !look.record;
  }
  return look;
}

std::optional<AttemptRecord> readRecord(const std::string& dir) { return lookAtRecord(dir).record; }

// When the folder's TRIGGER.json was written: its own time, else the file's (a corrupt one).
std::optional<double> triggerTime(const std::string& dir) {
  const std::string path = triggerPath(dir);
  const std::optional<FileStat> st = dumpFs().stat(path);
  if (!st) return std::nullopt;
  if (std::optional<std::string> text = readRecordText(path)) {
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_discarded()) {
      if (Expected<TriggerRecord> t = triggerFromJson(j); t && t->time_unix_s > 0) return t->time_unix_s;
    }
  }
  return st->mtime_unix_s;
}

// A folder that triggered before this process started belongs to an earlier launch.
bool triggeredBefore(const std::string& dir, double started_unix_s) {
  std::optional<double> t = triggerTime(dir);
  return t && *t < started_unix_s;
}

enum class Verdict { kMine, kNotMine, kClaimedMeanwhile };

Expected<Verdict> tryFolder(const AttemptClaim& c, const std::string& dir, const std::string& name,
                            AttemptRecord& out) {
  const RecordLook look = lookAtRecord(dir);
  if (look.unreadable) return Verdict::kNotMine;  // a damaged record names no launch: left alone
  if (const std::optional<AttemptRecord>& rec = look.record) {
    if (rec->key != c.launch.key || triggeredBefore(dir, c.started_unix_s)) return Verdict::kNotMine;
    out = std::move(*rec);
    return Verdict::kMine;
  }
  // No record when we looked: creating ours decides (one made since makes the create fail
  // and the caller look again).
  if (triggeredBefore(dir, c.started_unix_s)) return Verdict::kNotMine;
  AttemptRecord mine;
  mine.job_id = c.job_id;
  mine.name = name;
  mine.key = c.launch.key;
  mine.restart = c.launch.restart;
  mine.started_unix_s = c.started_unix_s;
  mine.host = c.host;
  mine.pid = c.pid;
  mine.rank = c.rank;
  Expected<bool> created = createFileExclusively(attemptRecordPath(dir), toJson(mine).dump(1) + "\n");
  if (!created) return Error{created.error()};
  if (!*created) return Verdict::kClaimedMeanwhile;
  out = std::move(mine);
  return Verdict::kMine;
}

double wallNow() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

bool isAttemptFolder(const fs::path& dir) {
  return dir.parent_path().filename() == "attempts" && fs::exists(attemptRecordPath(dir.string()));
}

}  // namespace

LaunchKey launchKeyFromEnv(const EnvLookup& env) {
  LaunchKey k;
  std::vector<std::string> parts;
  // Slurm: each srun of an allocation is a step; a requeued job keeps its id and counts restarts.
  if (const char* step = envValue(env, "SLURM_STEP_ID")) parts.push_back(fmt::format("step-{}", step));
  if (std::optional<int> requeue = count(envValue(env, "SLURM_RESTART_COUNT")); requeue && *requeue > 0) {
    parts.push_back(fmt::format("requeue-{}", *requeue));
    k.restart = *requeue;
  }
  // torchrun: every agent counts the restarts of its workers (TORCHELASTIC_RUN_ID stays).
  if (std::optional<int> restart = count(envValue(env, "TORCHELASTIC_RESTART_COUNT"))) {
    parts.push_back(fmt::format("restart-{}", *restart));
    k.restart = *restart;
  }
  // An MPI launcher names each launch (PMIx namespace: Open MPI 4/5, PRRTE, Slurm's pmix).
  const char* launch = envValue(env, "PMIX_NAMESPACE");
  if (launch == nullptr) launch = envValue(env, "OMPI_MCA_ess_base_jobid");
  if (launch != nullptr && parts.empty()) parts.push_back(fmt::format("mpi-{}", launch));
  for (const std::string& p : parts) k.key += (k.key.empty() ? "" : ".") + p;
  return k;
}

double processStartUnixS() {
  // starttime (field 22) counts clock ticks since boot; CLOCK_BOOTTIME is the same clock.
  std::optional<std::string> stat = readProcText("/proc/self/stat");
  const double now = wallNow();
  if (!stat) return now;
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return now;
  std::istringstream fields(stat->substr(close + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  timespec boot{};
  long hz = ::sysconf(_SC_CLK_TCK);
  if (start_ticks == 0 || hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return now;
  double since_boot = static_cast<double>(boot.tv_sec) + boot.tv_nsec / 1e9;
  return now - (since_boot - static_cast<double>(start_ticks) / static_cast<double>(hz));
}

nlohmann::json toJson(const AttemptRecord& a) { return schema::toJson(a); }
Expected<AttemptRecord> attemptFromJson(const nlohmann::json& j) { return schema::fromJson<AttemptRecord>(j); }

std::string attemptRecordPath(const std::string& attempt_dir) { return attempt_dir + "/ATTEMPT.json"; }
std::string attemptsDir(const std::string& job_dir) { return job_dir + "/attempts"; }

Expected<ClaimedAttempt> claimAttempt(const AttemptClaim& c) {
  const std::string base = safeName(c.launch.key.empty() ? "run" : c.launch.key);
  // Decided from the flat folder's record as it stands; a race lost there decides again.
  for (int round = 0; round < 8; ++round) {
    const RecordLook look = lookAtRecord(c.job_dir);
    const std::optional<AttemptRecord>& flat = look.record;
    // From this one look: a record made after it is met by the create below, not skipped.
    const bool flat_possible = flat ? flat->key == c.launch.key : !look.unreadable;
    bool lost_race = false;
    for (int i = flat_possible ? 0 : 1; i <= kMaxNamesPerKey && !lost_race; ++i) {
      const bool in_flat = flat_possible && i == 0;
      const std::string name = i <= 1 ? base : fmt::format("{}.{}", base, i);
      const std::string dir = in_flat ? c.job_dir : attemptsDir(c.job_dir) + "/" + name;
      AttemptRecord record;
      Expected<Verdict> v = tryFolder(c, dir, name, record);
      if (!v) return Error{v.error()};
      if (*v == Verdict::kClaimedMeanwhile && in_flat) lost_race = true;
      // Another launch's record appeared in the flat folder since we looked: `base` is still free
      // under attempts/, so decide again rather than skip to `.2`.
      if (*v == Verdict::kNotMine && in_flat && !flat) {
        std::optional<AttemptRecord> now = readRecord(c.job_dir);
        if (now && now->key != c.launch.key) lost_race = true;
      }
      if (*v == Verdict::kClaimedMeanwhile && !in_flat) v = tryFolder(c, dir, name, record);
      if (v && *v == Verdict::kMine) return ClaimedAttempt{dir, std::move(record)};
      if (i == 0) ++i;  // the flat folder held `base`: later names start at .2
    }
    if (!lost_race) break;
  }
  return Error{fmt::format("no attempt folder left under {} for launch '{}'", attemptsDir(c.job_dir), base)};
}

std::string AttemptEntry::name() const {
  if (record && !record->name.empty()) return record->name;
  return fs::path(dir).filename() == "attempts" ? "" : fs::path(dir).lexically_normal().filename().string();
}

std::vector<AttemptEntry> listAttempts(const std::string& job_dir) {
  std::vector<AttemptEntry> out;
  std::error_code ec;
  std::optional<AttemptRecord> flat = readRecord(job_dir);
  bool flat_used = flat.has_value();
  if (!flat_used) {
    for (const auto& e : fs::directory_iterator(job_dir, ec)) {
      if (e.path().filename() != "attempts") {
        flat_used = true;
        break;
      }
    }
  }
  if (flat_used) out.push_back({job_dir, std::move(flat)});
  for (const auto& e : fs::directory_iterator(attemptsDir(job_dir), ec)) {
    if (!e.is_directory(ec)) continue;
    out.push_back({e.path().string(), readRecord(e.path().string())});
  }
  // Oldest first; the flat folder is the first attempt when nothing says otherwise.
  std::stable_sort(out.begin(), out.end(), [&](const AttemptEntry& a, const AttemptEntry& b) {
    double ta = a.record ? a.record->started_unix_s : (a.dir == job_dir ? 0 : 1e18);
    double tb = b.record ? b.record->started_unix_s : (b.dir == job_dir ? 0 : 1e18);
    return ta < tb;
  });
  return out;
}

Expected<ChosenAttempt> chooseAttempt(const std::string& job_dir, const std::string& selector) {
  fs::path given = fs::path(job_dir).lexically_normal();
  if (given.filename().empty()) given = given.parent_path();
  std::string listed = job_dir;
  std::string wanted = selector;
  if (isAttemptFolder(given)) {
    if (!selector.empty()) return Error{fmt::format("{} is one attempt's folder: --attempt needs the job folder", job_dir)};
    listed = given.parent_path().parent_path().string();
    wanted = given.string();
  }
  std::vector<AttemptEntry> all = listAttempts(listed);
  if (all.empty()) return ChosenAttempt{{job_dir, std::nullopt}, 1, 1};
  const int n = static_cast<int>(all.size());
  auto pick = [&](int index) { return ChosenAttempt{all[static_cast<size_t>(index)], index + 1, n}; };
  if (wanted.empty()) return pick(n - 1);
  if (std::all_of(wanted.begin(), wanted.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    int number = std::atoi(wanted.c_str());
    if (number < 1 || number > n) return Error{fmt::format("attempt {} does not exist: {} holds {} attempt(s)", wanted, job_dir, n)};
    return pick(number - 1);
  }
  for (int i = 0; i < n; ++i) {
    if (all[static_cast<size_t>(i)].name() == wanted || all[static_cast<size_t>(i)].dir == wanted) return pick(i);
  }
  std::string names;
  for (const AttemptEntry& a : all) names += (names.empty() ? "" : ", ") + a.name();
  return Error{fmt::format("no attempt '{}' in {}; it holds: {}", wanted, job_dir, names)};
}

bool isJobFolder(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"TRIGGER.json", "SUSPECT.json", "ATTEMPT.json", "TRIGGER.beacon", "ranks", "metrics", "attempts"})
    if (fs::exists(fs::path(dir) / name, ec)) return true;
  return false;
}

std::vector<JobInRoot> jobsInDumpRoot(const std::string& root) {
  std::vector<JobInRoot> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory(ec) || !isJobFolder(e.path().string())) continue;
    JobInRoot j{e.path().string(), 0, 1};
    std::vector<AttemptEntry> attempts = listAttempts(j.dir);
    j.attempts = std::max<int>(1, static_cast<int>(attempts.size()));
    if (!attempts.empty() && attempts.back().record) j.newest_unix_s = attempts.back().record->started_unix_s;
    if (j.newest_unix_s <= 0) {
      auto t = fs::last_write_time(e.path(), ec);
      if (!ec)
        j.newest_unix_s = std::chrono::duration<double>(std::chrono::file_clock::to_sys(t).time_since_epoch()).count();
    }
    jobs.push_back(std::move(j));
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobInRoot& a, const JobInRoot& b) { return a.newest_unix_s > b.newest_unix_s; });
  return jobs;
}

}  // namespace hangwatch
