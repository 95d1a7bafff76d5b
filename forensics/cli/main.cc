// forensics: the hangwatch command line (DESIGN.md §5).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "hangwatch/common/dump_mode.h"
#include "hangwatch/forensics/cli/analyze_command.h"
#include "hangwatch/forensics/cli/collect_command.h"
#include "hangwatch/forensics/cli/io_helper_command.h"
#include "hangwatch/forensics/cli/node_summary_command.h"
#include "hangwatch/forensics/cli/ras_command.h"
#include "hangwatch/forensics/cli/report_command.h"
#include "hangwatch/forensics/cli/timeline_command.h"
#include "hangwatch/forensics/cli/trigger_command.h"

using hangwatch::forensics::Command;

namespace {

std::vector<std::unique_ptr<Command>> allCommands() {
  std::vector<std::unique_ptr<Command>> c;
  c.push_back(std::make_unique<hangwatch::forensics::ReportCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::AnalyzeCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::CollectCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::TimelineCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::TriggerCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::NodeSummaryCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::RasCommand>());
  c.push_back(std::make_unique<hangwatch::forensics::IoHelperCommand>());
  return c;
}

void printHelp(const std::vector<std::unique_ptr<Command>>& commands, std::ostream& out) {
  out << "usage: forensics <command> [args]\n\nHang forensics for distributed GPU training.\n\ncommands:\n";
  for (const auto& c : commands) out << "  " << c->name() << std::string(c->name().size() < 14 ? 14 - c->name().size() : 1, ' ') << c->summary() << "\n";
  out << "\n'forensics <command> --help' describes one command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  auto commands = allCommands();
  if (argc < 2) {
    printHelp(commands, std::cerr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printHelp(commands, std::cout);
    return 0;
  }
  for (const auto& c : commands) {
    if (c->name() != name) continue;
    std::string warning;
    hangwatch::dumpFileMode(&warning);
    if (!warning.empty()) std::cerr << "forensics: " << warning << "\n";
    return c->run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::cerr << "forensics: unknown command '" << name << "'\n\n";
  printHelp(commands, std::cerr);
  return 2;
}
