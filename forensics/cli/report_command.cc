#include "hangwatch/forensics/cli/report_command.h"

#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/attempt.h"
#include "hangwatch/common/fallback_record.h"
#include "hangwatch/forensics/cli/split_dumps.h"
#include "hangwatch/verdict/earlier_attempts.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/collection_status.h"
#include "hangwatch/verdict/html_report_writer.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/json_report_writer.h"
#include "hangwatch/verdict/report_builder.h"
#include "hangwatch/verdict/text_report_writer.h"
#if HANGWATCH_WITH_SLOWDOWN
#include "hangwatch/slowdown/slowdown_analyzer.h"
#endif

namespace hangwatch::forensics {
namespace {

// An operator runs the report right after the job died: collectors may still be writing.
// They announce a deadline (their own hard bounds, ~90 s) and are never waited for beyond it.
constexpr double kDefaultWaitS = 90;

// Waits while some rank's collector is still at work, at most `wait_s`; says so on stderr.
// Only `ranks` are looked at (those no node summary covers: a covered rank is done). True
// when it waited.
bool waitForCollectors(const std::string& job_dir, double wait_s, const std::vector<int>& ranks) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration<double>(wait_s);
  bool said = false;
  std::vector<int> collecting = ranks;
  for (;;) {
    // After the first pass only the ranks still collecting are looked at again.
    verdict::CollectionStatus status = verdict::readCollectionStatus(job_dir, verdict::wallClockNow(), collecting);
    collecting = status.collecting;
    if (status.collecting.empty()) break;
    double left = std::chrono::duration<double>(until - Clock::now()).count();
    if (left <= 0) {
      std::cerr << "forensics report: stopped waiting after " << wait_s << " s; reporting without their data\n";
      break;
    }
    if (!said) {
      stackmerge::RankSet ranks;
      for (int r : status.collecting) ranks.insert(r);
      double by_deadline = status.latest_deadline_unix_s - verdict::wallClockNow();
      std::cerr << "forensics report: waiting for rank(s) " << ranks.toString() << " still collecting (up to "
                << static_cast<int>(std::max(0.0, std::min(left, by_deadline)) + 0.5) << " s; --wait 0 skips this)\n";
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return said;
}

// What a job's newest attempt holds, cheaply: its stage from the files, its verdict from the
// report saved there by an earlier run (none: not reported yet).
std::string jobLine(const JobInRoot& j) {
  Expected<ChosenAttempt> newest = chooseAttempt(j.dir);
  const std::string dir = newest ? newest->entry.dir : j.dir;
  struct stat st;
  const char* stage = ::stat(triggerPath(dir).c_str(), &st) == 0   ? "hang"
                      : ::stat(suspectPath(dir).c_str(), &st) == 0 ? "suspected"
                                                                   : "none";
  std::string kind = "not reported yet";
  std::ifstream saved(reportDir(dir) + "/report.json");
  if (saved) {
    nlohmann::json r = nlohmann::json::parse(saved, nullptr, false);
    if (!r.is_discarded() && r.contains("verdict") && r["verdict"].contains("kind") && r["verdict"]["kind"].is_string())
      kind = r["verdict"]["kind"].get<std::string>() + " (saved report)";
  }
  std::time_t t = static_cast<std::time_t>(j.newest_unix_s);
  std::tm utc{};
  gmtime_r(&t, &utc);
  return fmt::format("  {:<24} {:%Y-%m-%d %H:%M} UTC  stage {:<9} {}{}", std::filesystem::path(j.dir).filename().string(),
                     utc, stage, kind, j.attempts > 1 ? fmt::format(", {} attempts", j.attempts) : "");
}

// `report` on the dump root ($HANGWATCH_DUMP_DIR) instead of a job's folder: the job in it, or
// the newest of several, after listing them. Returns the job folder to report; `dir` itself
// when it is no dump root.
std::string jobOfDumpRoot(const std::string& dir) {
  if (isJobFolder(dir)) return dir;
  std::vector<JobInRoot> jobs = jobsInDumpRoot(dir);
  if (jobs.empty()) return dir;
  if (jobs.size() == 1) {
    std::cerr << "forensics report: " << dir << " is a dump root holding one job: reporting " << jobs[0].dir << "\n";
    return jobs[0].dir;
  }
  std::cerr << "forensics report: " << dir << " is a dump root holding " << jobs.size() << " jobs (newest first):\n";
  for (const JobInRoot& j : jobs) std::cerr << jobLine(j) << "\n";
  std::cerr << "forensics report: reporting the newest, " << jobs[0].dir << "; `forensics report " << dir
            << "/<job>` reports another\n";
  return jobs[0].dir;
}

verdict::AttemptInfo attemptInfo(const ChosenAttempt& c) {
  verdict::AttemptInfo a;
  a.name = c.entry.name();
  a.number = c.number;
  a.count = c.count;
  if (c.entry.record) {
    a.restart = c.entry.record->restart;
    a.started_unix_s = c.entry.record->started_unix_s;
  }
  return a;
}

}  // namespace

std::string ReportCommand::usage() const {
  return std::string("usage: forensics report <job-dir> [--format text|json|html] [-o FILE] [--wait S] [--attempt A]\n"
         "                        [--no-save] [--threads N] [--flat] [--fallback DIR]...\n"
         "\n"
         "Reads every rank's dumps under <job-dir> (TRIGGER.json, ranks/*.watchdog.json,\n"
         "ranks/*.forensics.json) and says what hung and who is at fault: communication-hang\n"
         "(a link or a rank, from ring progress), non-communication-hang (a rank not in the\n"
         "collective, and where it is), collective-mismatch, no-hang or inconclusive (with why).\n"
         "Missing, truncated, corrupt or foreign-job rank files are reported, never fatal.\n"
         "With only an early warning (SUSPECT.json, no TRIGGER.json) the verdict comes from the\n"
         "ranks' suspect snapshots (stage: suspected). A node summary (nodes/<host>.json, written\n"
         "by the node's last collector) stands for the rank files of the ranks it covers: one\n"
         "file per node instead of three per rank, the same report. <job-dir> may also be the dump root\n"
         "(HANGWATCH_DUMP_DIR): its one job is reported, or of several the newest, after a list.\n"
         "\n"
         "  --format F   text (default), json or html, printed to stdout\n"
         "  -o FILE      write that format to FILE instead of stdout\n"
         "  --wait S     first wait up to S seconds (default 90, 0: not at all) for ranks whose\n"
         "               collectors are still at work (ranks/rNNNNN.state.json says collecting),\n"
         "               never past the deadlines they announced; those still collecting after\n"
         "               that are listed as ranks_collecting and the verdict says what it lacks\n"
         "  --no-save    do not also write report/report.{txt,json,html} in the attempt's folder\n") +
         kAttemptOptionHelp +
         "  --threads N  ranks read in parallel (default: one per core)\n"
         "  --flat       read every rank's own files, not the node summaries\n"
         "  --fallback DIR  also read a node-local fallback folder (HANGWATCH_FALLBACK_DIR, or the\n"
         "               job's folder in it), where ranks wrote when the dump folder was full,\n"
         "               read-only, gone or stalled; repeat for each node's. Of a file in both,\n"
         "               the newest is read; metrics lines of both are read in order. The report\n"
         "               says which ranks' files came from where\n"
         "\n"
         "Unless --no-save is given, all three formats are also written to <job-dir>/report/\n"
         "when <job-dir> holds any job file (a failure to write there is a warning).\n"
         "A directory with no dumps gets a report too: no-hang when ranks wrote metrics but\n"
         "nothing triggered, else inconclusive.\n"
         "Exit 0 when a report was made, whatever the verdict; 1 when <job-dir> is not a readable\n"
         "directory or FILE cannot be written; 2 on usage errors.\n";
}

namespace {

// The report in every format, saved in the job's report/ folder (unless `save` is off or the
// folder holds no job), and the one asked for printed or written to `out_file`.
// Timelines read for the critical path at most: beyond that the report's latency matters
// more, and `forensics analyze` has it.
constexpr size_t kSlowdownRanksAtMost = 256;

// A hang that follows a slowdown: the critical path of the steps before it (the same graph
// `forensics analyze` builds) says which rank made them slow, as evidence sentences.
void addSlowdownBeforeHang(verdict::Report& report, const std::string& job_dir) {
#if HANGWATCH_WITH_SLOWDOWN
  if (report.verdict.kind == verdict::VerdictKind::kNoHang) return;
  std::error_code ec;
  size_t timelines = 0;
  for (auto it = std::filesystem::directory_iterator(timelineDir(job_dir), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++timelines;
  if (timelines < 2 || timelines > kSlowdownRanksAtMost) return;
  Expected<slowdown::JobProfile> job = slowdown::JobProfile::load(job_dir);
  if (!job) return;
  std::vector<std::string> notes;
  const std::optional<slowdown::CriticalPathAnalysis> path = slowdown::criticalPathOf(*job, notes);
  if (!path) return;
  for (const slowdown::SlowStepCause& c : path->causes)
    if (c.evidence.size() >= 2)
      report.verdict.evidence.push_back(fmt::format("Before the hang the job slowed down: {}. {} (`forensics analyze` "
                                                    "has the critical path of every step)",
                                                    c.evidence[0], c.evidence[1]));
#else
  (void)report;
  (void)job_dir;
#endif
}

int writeReport(const verdict::Report& report, const std::string& job_dir, const std::string& format,
                const std::string& out_file, bool save) {
  std::string text = verdict::TextReportWriter::write(report);
  std::string json = verdict::JsonReportWriter::toJson(report).dump(1) + "\n";
  std::string html = verdict::HtmlReportWriter::write(report);
  // A directory with no job files is not a job's: leave it untouched.
  if (save && (report.job.has_report_inputs() || report.job.metrics_files > 0)) {
    std::string dir = reportDir(job_dir);
    for (const auto& [name, body] : {std::pair{"report.txt", &text}, {"report.json", &json}, {"report.html", &html}}) {
      Expected<Written> w = writeFileAtomically(dir + "/" + name, *body);
      if (!w) {
        std::cerr << "forensics report: warning: " << w.error() << "\n";
        break;
      }
    }
  }
  const std::string& chosen = format == "json" ? json : format == "html" ? html : text;
  if (out_file.empty()) {
    std::cout << chosen;
    return 0;
  }
  Expected<Written> w = writeFileAtomically(out_file, chosen);
  if (!w) {
    std::cerr << "forensics report: " << w.error() << "\n";
    return 1;
  }
  return 0;
}

// What the command line asked for.
struct ReportOptions {
  std::string job_dir, format = "text", out_file, attempt;
  std::vector<std::string> fallbacks;
  unsigned threads = 0;
  double wait_s = kDefaultWaitS;
  bool save = true, flat = false;
};

// The options, or the usage error's message.
Expected<ReportOptions> parseReportOptions(const std::vector<std::string>& args) {
  ReportOptions o;
  std::string threads_text, wait_text, fallback;
  OptionCursor cur{args};
  while (!cur.done()) {
    Expected<bool> took = cur.take("--format", o.format);
    if (took && !*took) took = cur.take("-o", o.out_file);
    if (took && !*took) took = cur.take("--threads", threads_text);
    if (took && !*took) took = cur.take("--wait", wait_text);
    if (took && !*took) took = cur.take("--attempt", o.attempt);
    if (took && !*took && (took = cur.take("--fallback", fallback)) && *took) o.fallbacks.push_back(fallback);
    if (!took) return Error{took.error()};
    if (*took) continue;
    const std::string& a = args[cur.i++];
    if (a == "--no-save") {
      o.save = false;
    } else if (a == "--flat") {
      o.flat = true;
    } else if (!a.empty() && a[0] == '-') {
      return Error{"unknown option '" + a + "'"};
    } else if (o.job_dir.empty()) {
      o.job_dir = a;
    } else {
      return Error{"expected one <job-dir>, got also '" + a + "'"};
    }
  }
  if (o.job_dir.empty()) return Error{"missing <job-dir>"};
  if (o.format != "text" && o.format != "json" && o.format != "html") return Error{"--format wants text, json or html"};
  if (!threads_text.empty()) {
    Expected<int> n = parseInt("--threads", threads_text, 1, 1024);
    if (!n) return Error{n.error()};
    o.threads = static_cast<unsigned>(*n);
  }
  if (!wait_text.empty()) {
    char* end = nullptr;
    o.wait_s = std::strtod(wait_text.c_str(), &end);
    if (*end != '\0' || !(o.wait_s >= 0) || o.wait_s > 86400)
      return Error{"--wait wants seconds >= 0, got '" + wait_text + "'"};
  }
  return o;
}

// Split dumps are read through a merged view of the job folder and the fallbacks (job_dir
// becomes the view's); a fallback folder read alone says where the rest is. Notes on stderr.
Expected<std::optional<MergedDumps>> openSplitDumps(std::string& job_dir, std::vector<std::string> fallbacks,
                                                    std::vector<std::string>& notes) {
  std::optional<MergedDumps> merged;
  if (!fallbacks.empty()) {
    for (std::string& f : fallbacks) f = fallbackJobFolder(f, job_dir);
    Expected<MergedDumps> m = MergedDumps::make(job_dir, fallbacks);
    if (!m) return Error{m.error()};
    merged.emplace(std::move(*m));
    notes = merged->notes();
    job_dir = merged->dir();
  } else if (Expected<FallbackRecord> rec = readFallbackRecord(job_dir)) {
    notes.push_back(fmt::format("{} is the node-local fallback folder of {} (host {}: {}); the other ranks' dumps "
                                "are there: `forensics report {} --fallback {}` reads both",
                                job_dir, rec->primary, rec->host, rec->why, rec->primary, job_dir));
  }
  for (const std::string& note : notes) std::cerr << "forensics report: " << note << "\n";
  return merged;
}

// A restarted rank may join with an id an earlier launch made: those launches' snapshots say.
void noteEarlierLaunches(verdict::JobData& job, const ChosenAttempt& which) {
  std::vector<verdict::EarlierAttempt> earlier;
  const std::filesystem::path chosen(which.entry.dir);
  const bool later = chosen.parent_path().filename() == "attempts";
  const std::vector<AttemptEntry> attempts =
      listAttempts(later ? chosen.parent_path().parent_path().string() : chosen.string());
  for (size_t i = 0; i + 1 < static_cast<size_t>(which.number) && i < attempts.size(); ++i)
    earlier.push_back({attempts[i].name(), attempts[i].dir});
  verdict::noteIdsMadeEarlier(job, earlier);
}

}  // namespace

int ReportCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  Expected<ReportOptions> parsed = parseReportOptions(args);
  if (!parsed) return usageError(parsed.error());
  ReportOptions& o = *parsed;
  std::string job_dir = jobOfDumpRoot(o.job_dir);
  std::vector<std::string> split_notes;
  Expected<std::optional<MergedDumps>> merged = openSplitDumps(job_dir, o.fallbacks, split_notes);
  if (!merged) {
    std::cerr << "forensics report: " << merged.error() << "\n";
    return 1;
  }
  Expected<ChosenAttempt> which = chooseAttemptFor(name(), job_dir, o.attempt);
  if (!which) {
    std::cerr << "forensics report: " << which.error() << "\n";
    return o.attempt.empty() ? 1 : 2;
  }
  job_dir = which->entry.dir;
  verdict::LoadOptions load;
  load.node_summaries = !o.flat;
  if (o.wait_s > 0)
    load.before_rank_files = [&](const std::vector<int>& ranks) { return waitForCollectors(job_dir, o.wait_s, ranks); };
  Expected<verdict::JobData> job = verdict::JobLoader(o.threads, load).load(job_dir);
  if (!job) {
    std::cerr << "forensics report: " << job.error() << "\n";
    return 1;
  }
  for (const std::string& note : job->read_notes) std::cerr << "forensics report: " << note << "\n";
  job->attempt = attemptInfo(*which);
  for (const std::string& note : split_notes) job->problems.push_back(note);
  noteEarlierLaunches(*job, *which);
  verdict::Report report = verdict::ReportBuilder::build(std::move(*job));
  addSlowdownBeforeHang(report, which->entry.dir);
  bool save = o.save;
  if (*merged) {
    // Named and saved as the job's own folder, never the merged view's temporary one.
    job_dir = (*merged)->original(job_dir);
    report.job.job_dir = job_dir;
    std::error_code ec;
    if (save && !std::filesystem::is_directory(job_dir, ec)) save = false;
  }
  return writeReport(report, job_dir, o.format, o.out_file, save);
}

}  // namespace hangwatch::forensics
