#pragma once
// forensics io-helper --fd N: the watchdog's helper process for the dump folder's file
// operations (watchdog/io_helper.h). libhangwatch.so starts one per rank; not for people.
#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class IoHelperCommand : public Command {
 public:
  IoHelperCommand()
      : Command("io-helper", "(started by the watchdog) does a rank's file operations on the dump folder") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

}  // namespace hangwatch::forensics
