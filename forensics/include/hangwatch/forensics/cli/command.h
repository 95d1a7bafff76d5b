#pragma once
// One subcommand of the `forensics` CLI (rr-style): adding a subcommand means adding
// one Command subclass in its own file and listing it in main.cc.
#include <string>
#include <vector>

#include "hangwatch/common/attempt.h"
#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

class Command {
 public:
  Command(std::string name, std::string summary) : name_(std::move(name)), summary_(std::move(summary)) {}
  virtual ~Command() = default;

  const std::string& name() const { return name_; }
  const std::string& summary() const { return summary_; }
  virtual std::string usage() const = 0;
  // `args` excludes the program and subcommand names. Returns the exit code.
  virtual int run(const std::vector<std::string>& args) = 0;

  static bool wantsHelp(const std::vector<std::string>& args);
  // Prints "forensics <name>: <message>" and the usage line to stderr; returns 2.
  int usageError(const std::string& message) const;

 private:
  std::string name_;
  std::string summary_;
};

// Parses "--flag VALUE" and "--flag=VALUE" forms.
struct OptionCursor {
  const std::vector<std::string>& args;
  size_t i = 0;

  bool done() const { return i >= args.size(); }
  // True when args[i] is `flag` (either form); `value` receives its value.
  Expected<bool> take(const std::string& flag, std::string& value);
};

Expected<int> parseInt(const std::string& flag, const std::string& text, long min, long max);
Expected<double> parseSeconds(const std::string& flag, const std::string& text);
// Ranks as ranges ("0-3,8", "1,2,3"), in any order: ascending, each once.
Expected<std::vector<int>> parseRanks(const std::string& flag, const std::string& text);

// The attempt of `job_dir` a command reads (common/attempt.h): the newest, or the one `selector`
// names (--attempt N|NAME). When the job holds several, says on stderr which one it reads.
Expected<ChosenAttempt> chooseAttemptFor(const std::string& command, const std::string& job_dir,
                                         const std::string& selector);
// The usage lines of --attempt, shared by the commands that take it.
extern const char* const kAttemptOptionHelp;

}  // namespace hangwatch::forensics
