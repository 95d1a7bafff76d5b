#pragma once
// forensics timeline <job-dir> -o trace.json [--last SECONDS]: the ops every rank's
// watchdog kept in its bounded timeline ring, as one Chrome trace for Perfetto.
#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class TimelineCommand : public Command {
 public:
  TimelineCommand() : Command("timeline", "a Perfetto / Chrome trace of the job's last ops on every rank") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

}  // namespace hangwatch::forensics
