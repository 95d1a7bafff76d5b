#pragma once
// forensics analyze <job-dir> [--baseline DIR] [--format text|json] [-o FILE]: who is
// slow, from every rank's rolling metrics (DESIGN.md §5; analyzer/slowdown/README.md).
#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class AnalyzeCommand : public Command {
 public:
  AnalyzeCommand() : Command("analyze", "slowdown findings from the rolling metrics: slow GPU, link, stalls") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

}  // namespace hangwatch::forensics
