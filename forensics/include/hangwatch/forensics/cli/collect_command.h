#pragma once
// forensics collect --pid PID [--rank R] --out DIR [--backend auto|cuda|sim|host]
// (DESIGN.md §5): stacks, Python frames and debugger notes of one live process.
#include "hangwatch/forensics/cli/command.h"
#include "hangwatch/forensics/collector.h"

namespace hangwatch::forensics {

class CollectCommand : public Command {
 public:
  CollectCommand() : Command("collect", "take native + Python stacks of a live rank into ranks/rNNNNN.forensics.json") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;

  // `debugger_env` is $HANGWATCH_DEBUGGER.
  static Expected<CollectOptions> parse(const std::vector<std::string>& args, const char* debugger_env);
};

}  // namespace hangwatch::forensics
