#include "hangwatch/forensics/cli/timeline_command.h"

#include <filesystem>
#include <iostream>
#include <optional>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/slowdown/chrome_trace.h"
#include "hangwatch/slowdown/slowdown_analyzer.h"
#include "hangwatch/common/timeline_window.h"

namespace hangwatch::forensics {

std::string TimelineCommand::usage() const {
  return std::string("usage: forensics timeline <job-dir> -o trace.json [--last SECONDS] [--attempt A]\n"
         "\n"
         "Joins every rank's timeline/rNNNNN.json (the last ops the watchdog kept, rewritten\n"
         "every HANGWATCH_METRICS_INTERVAL) into one Chrome trace: a process per rank, a thread\n"
         "per stream and one for the host (launch points, synchronizations); arrows join a\n"
         "collective's instances across ranks (communicator + sequence number). Open it in\n"
         "https://ui.perfetto.dev or chrome://tracing. --last keeps the final SECONDS only.\n"
         "\n") + kAttemptOptionHelp + "\n"
         "Exit 0 when the trace was written, 1 when no timeline could be read, 2 on usage errors.\n";
}

namespace {

// Every rank's timeline of the job folder into `trace`; how many were read.
int addTimelines(const std::string& job_dir, slowdown::ChromeTrace& trace, std::error_code& ec) {
  namespace fs = std::filesystem;
  int read = 0;
  for (const auto& entry : fs::directory_iterator(timelineDir(job_dir), ec)) {
    std::optional<RankFile> file = parseRankFileName(entry.path().filename().string());
    if (!file || file->kind != RankFileKind::kTimeline) continue;
    Expected<TimelineWindow> w = readTimelineFile(entry.path().string());
    if (!w) {
      std::cerr << "forensics timeline: skipped " << w.error() << "\n";
      continue;
    }
    trace.addRank(*w);
    ++read;
  }
  return read;
}

// The critical path needs every rank's step ends (metrics/): without them the trace is written
// without its track. Whether it was added.
bool addCriticalPath(const std::string& job_dir, slowdown::ChromeTrace& trace) {
  Expected<slowdown::JobProfile> job = slowdown::JobProfile::load(job_dir);
  if (!job) return false;
  std::vector<std::string> notes;
  std::optional<slowdown::CriticalPathAnalysis> path = slowdown::criticalPathOf(*job, notes);
  if (!path) return false;
  trace.addCriticalPath(*path);
  return true;
}

}  // namespace

int TimelineCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  std::string job_dir, out_path, last_text, attempt;
  OptionCursor cursor{args};
  while (!cursor.done()) {
    Expected<bool> took = cursor.take("-o", out_path);
    if (took && !*took) took = cursor.take("--last", last_text);
    if (took && !*took) took = cursor.take("--attempt", attempt);
    if (!took) return usageError(took.error());
    if (*took) continue;
    const std::string& a = args[cursor.i];
    if (!a.empty() && a[0] == '-') return usageError("unknown option '" + a + "'");
    if (!job_dir.empty()) return usageError("expected one <job-dir>");
    job_dir = a;
    ++cursor.i;
  }
  if (job_dir.empty()) return usageError("missing <job-dir>");
  if (out_path.empty()) return usageError("missing -o trace.json");
  double last_s = 0;
  if (!last_text.empty()) {
    Expected<double> s = parseSeconds("--last", last_text);
    if (!s) return usageError(s.error());
    last_s = *s;
  }
  Expected<ChosenAttempt> chosen = chooseAttemptFor(name(), job_dir, attempt);
  if (!chosen) {
    std::cerr << "forensics timeline: " << chosen.error() << "\n";
    return attempt.empty() ? 1 : 2;
  }
  job_dir = chosen->entry.dir;
  slowdown::ChromeTrace trace(last_s);
  std::error_code ec;
  const int read = addTimelines(job_dir, trace, ec);
  if (read == 0) {
    std::cerr << "forensics timeline: no readable timeline/rNNNNN.json in " << job_dir
              << (ec ? " (" + ec.message() + ")" : "") << "\n";
    return 1;
  }
  const bool with_path = addCriticalPath(job_dir, trace);
  auto written = writeFileAtomically(out_path, trace.build().dump() + "\n");
  if (!written) {
    std::cerr << "forensics timeline: " << written.error() << "\n";
    return 1;
  }
  std::cout << "forensics timeline: " << read << " rank(s) written to " << out_path
            << (with_path ? ", with the critical path of each step as its own track" : "") << "\n";
  return 0;
}

}  // namespace hangwatch::forensics
