#include "hangwatch/forensics/cli/command.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

namespace hangwatch::forensics {

bool Command::wantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int Command::usageError(const std::string& message) const {
  std::cerr << "forensics " << name_ << ": " << message << "\n\n" << usage();
  return 2;
}

Expected<bool> OptionCursor::take(const std::string& flag, std::string& value) {
  const std::string& a = args[i];
  if (a == flag) {
    if (i + 1 >= args.size()) return Error{flag + " needs a value"};
    value = args[i + 1];
    i += 2;
    return true;
  }
  if (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=') {
    value = a.substr(flag.size() + 1);
    ++i;
    return true;
  }
  return false;
}

Expected<int> parseInt(const std::string& flag, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    return Error{fmt::format("{} wants an integer in [{}, {}], got '{}'", flag, min, max, text)};
  }
  return static_cast<int>(v);
}

Expected<double> parseSeconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 86400) {
    return Error{flag + " wants seconds > 0, got '" + text + "'"};
  }
  return v;
}

const char* const kAttemptOptionHelp =
    "  --attempt A  which launch of a restarted job to read: N (1 = the first) or its name;\n"
    "               default: the newest. A restarted job keeps each launch's files apart:\n"
    "               the first in <job-dir>, later ones in <job-dir>/attempts/<name>/\n";

Expected<ChosenAttempt> chooseAttemptFor(const std::string& command, const std::string& job_dir,
                                         const std::string& selector) {
  Expected<ChosenAttempt> chosen = chooseAttempt(job_dir, selector);
  if (!chosen) return chosen;
  if (chosen->count > 1)
    std::cerr << "forensics " << command << ": " << job_dir << " holds " << chosen->count << " attempts; reading attempt "
              << chosen->number << " (" << chosen->entry.name() << ") in " << chosen->entry.dir << "\n";
  return chosen;
}

}  // namespace hangwatch::forensics
