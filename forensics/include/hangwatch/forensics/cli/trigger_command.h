#pragma once
// forensics trigger <job-dir>: creates TRIGGER.json by hand (reason "manual"), so every
// rank's watchdog dumps as if a hang had been detected (DESIGN.md §4).
#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class TriggerCommand : public Command {
 public:
  TriggerCommand() : Command("trigger", "make every rank of a job dump now (creates TRIGGER.json)") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

}  // namespace hangwatch::forensics
