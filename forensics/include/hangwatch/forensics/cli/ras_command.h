#pragma once
// forensics ras --pid PID [--rank R --out DIR] [--bound S]: asks NCCL's RAS of a process's node
// which members of the job's communicators answer. The watchdog of a node's lowest rank starts it
// when no collector runs (HANGWATCH_COLLECT=0), since a collector asks RAS itself.
#include <optional>

#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

struct RasCommandOptions {
  int pid = 0;
  std::optional<int> rank;
  std::string out_dir;  // empty: the answer goes to stdout
  double bound_s = 20;
};

class RasCommand : public Command {
 public:
  RasCommand() : Command("ras", "ask NCCL's RAS which ranks answer (ranks/rNNNNN.ras.json)") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;

  static Expected<RasCommandOptions> parse(const std::vector<std::string>& args);
};

}  // namespace hangwatch::forensics
