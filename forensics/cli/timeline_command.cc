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

int TimelineCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  std::string job_dir, out_path, last_text, attempt;
  OptionCursor cursor{args};
  while (!cursor.done()) {
    std::string value;
    Expected<bool> o = cursor.take("-o", value);
    if (!o) return usageError(o.error());
    if (*o) {
      out_path = value;
      continue;
    }
    Expected<bool> l = cursor.take("--last", value);
    if (!l) return usageError(l.error());
    if (*l) {
      last_text = value;
      continue;
    }
    Expected<bool> at = cursor.take("--attempt", value);
    if (!at) return usageError(at.error());
    if (*at) {
      attempt = value;
      continue;
    }
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
  namespace fs = std::filesystem;
  slowdown::ChromeTrace trace(last_s);
  int read = 0;
  std::error_code ec;
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
  if (read == 0) {
    std::cerr << "forensics timeline: no readable timeline/rNNNNN.json in " << job_dir
              << (ec ? " (" + ec.message() + ")" : "") << "\n";
    return 1;
  }
  // The critical path needs every rank's step ends (metrics/): without them the trace is
  // written without its track.
  bool with_path = false;
  if (Expected<slowdown::JobProfile> job = slowdown::JobProfile::load(job_dir)) {
    std::vector<std::string> notes;
    if (auto path = slowdown::criticalPathOf(*job, notes)) {
      trace.addCriticalPath(*path);
      with_path = true;
    }
  }
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
