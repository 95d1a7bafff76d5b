#pragma once
// A subcommand of the DESIGN.md §5 contract whose issue is still open: it exists,
// documents itself, and says which issue brings it (exit 2).
#include "command.h"

namespace hangwatch::forensics {

class PlannedCommand : public Command {
 public:
  PlannedCommand(std::string name, std::string summary, std::string synopsis, std::string issue)
      : Command(std::move(name), std::move(summary)), synopsis_(std::move(synopsis)), issue_(std::move(issue)) {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;

 private:
  std::string synopsis_;
  std::string issue_;
};

}  // namespace hangwatch::forensics
