#include "planned_command.h"

#include <iostream>

namespace hangwatch::forensics {

std::string PlannedCommand::usage() const {
  return "usage: forensics " + name() + " " + synopsis_ + "\n\n" + summary() + " (not implemented yet: " + issue_ + ")\n";
}

int PlannedCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  std::cerr << "forensics " << name() << ": not implemented yet (" << issue_ << ")\n";
  return 2;
}

}  // namespace hangwatch::forensics
