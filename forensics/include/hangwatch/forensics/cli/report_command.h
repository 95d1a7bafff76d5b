#pragma once
// forensics report <job-dir> [--format text|json|html] [-o FILE]: the hang report for the
// operations team (DESIGN.md §5): verdict, culprit, evidence, missing ranks, stack classes.
#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class ReportCommand : public Command {
 public:
  ReportCommand() : Command("report", "the hang report for the operations team") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

}  // namespace hangwatch::forensics
