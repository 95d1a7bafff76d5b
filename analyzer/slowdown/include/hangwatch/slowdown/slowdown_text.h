#pragma once
// `forensics analyze` output: text for people (who, what, against what, whose job to
// fix it) and JSON for tools (DESIGN.md §5: at least `findings`).
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/slowdown/slowdown_analyzer.h"

namespace hangwatch::slowdown {

std::string formatSlowdownText(const SlowdownAnalysis& a, const std::string& job_dir, bool with_baseline);
nlohmann::json slowdownJson(const SlowdownAnalysis& a, const std::string& job_dir, const std::string& baseline_dir);

}  // namespace hangwatch::slowdown
