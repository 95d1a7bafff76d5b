#include "hangwatch/forensics/cli/analyze_command.h"

#include <fstream>
#include <iostream>

#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/slowdown/slowdown_analyzer.h"
#include "hangwatch/slowdown/slowdown_text.h"

namespace hangwatch::forensics {

std::string AnalyzeCommand::usage() const {
  return std::string("usage: forensics analyze <job-dir> [--baseline DIR] [--format text|json] [-o FILE] [--attempt A]\n"
         "\n"
         "Reads every rank's metrics/rNNNNN.jsonl (and timeline/rNNNNN.json where present) and\n"
         "compares ranks with each other: GEMM TFLOPS per shape (slow-gpu), communicator bus\n"
         "bandwidth (slow-link), kernel issue latency (issue-stall), idle time between steps\n"
         "(dataloader-stall, host-stall) and inside steps (void). --baseline DIR compares with\n"
         "a saved healthy run of the same job as well (issue latency, void, bandwidth; its\n"
         "newest attempt).\n"
         "\n") + kAttemptOptionHelp + "\n"
         "Exit 0 when the analysis ran (whatever it found), 1 when no metrics could be read,\n"
         "2 on usage errors.\n";
}

int AnalyzeCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  std::string job_dir, baseline_dir, format = "text", out_path, attempt;
  OptionCursor cursor{args};
  while (!cursor.done()) {
    std::string value;
    bool taken = false;
    for (auto [flag, target] : {std::pair{"--baseline", &baseline_dir}, std::pair{"--format", &format},
                                std::pair{"-o", &out_path}, std::pair{"--attempt", &attempt}}) {
      Expected<bool> t = cursor.take(flag, value);
      if (!t) return usageError(t.error());
      if (*t) {
        *target = value;
        taken = true;
        break;
      }
    }
    if (taken) continue;
    const std::string& a = args[cursor.i];
    if (!a.empty() && a[0] == '-') return usageError("unknown option '" + a + "'");
    if (!job_dir.empty()) return usageError("expected one <job-dir>, got '" + job_dir + "' and '" + a + "'");
    job_dir = a;
    ++cursor.i;
  }
  if (job_dir.empty()) return usageError("missing <job-dir>");
  if (format != "text" && format != "json") return usageError("--format must be text or json, not '" + format + "'");

  Expected<ChosenAttempt> chosen = chooseAttemptFor(name(), job_dir, attempt);
  if (!chosen) {
    std::cerr << "forensics analyze: " << chosen.error() << "\n";
    return attempt.empty() ? 1 : 2;
  }
  job_dir = chosen->entry.dir;
  Expected<slowdown::JobProfile> job = slowdown::JobProfile::load(job_dir);
  if (!job) {
    std::cerr << "forensics analyze: " << job.error() << "\n";
    return 1;
  }
  std::optional<slowdown::JobProfile> baseline;
  if (!baseline_dir.empty()) {
    Expected<ChosenAttempt> base = chooseAttempt(baseline_dir);
    Expected<slowdown::JobProfile> b = slowdown::JobProfile::load(base ? base->entry.dir : baseline_dir);
    if (!b) {
      std::cerr << "forensics analyze: baseline: " << b.error() << "\n";
      return 1;
    }
    baseline = std::move(*b);
  }
  slowdown::SlowdownAnalysis analysis = slowdown::SlowdownAnalyzer().analyze(*job, baseline ? &*baseline : nullptr);
  if (baseline)
    for (const std::string& p : baseline->problems()) analysis.notes.push_back("baseline: " + p);
  std::string text = format == "json" ? slowdownJson(analysis, job_dir, baseline_dir).dump(2) + "\n"
                                      : formatSlowdownText(analysis, job_dir, baseline.has_value());
  if (out_path.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(out_path);
  if (!(out << text)) {
    std::cerr << "forensics analyze: cannot write " << out_path << "\n";
    return 1;
  }
  return 0;
}

}  // namespace hangwatch::forensics
