#include "hangwatch/forensics/cli/command.h"

#include <algorithm>
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

Expected<std::vector<int>> parseRanks(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  const Error bad{fmt::format("{} wants ranks such as 0-7 or 8,9,12-15, got '{}'", flag, text)};
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    const size_t dash = part.find('-', 1);
    Expected<int> first = parseInt(flag, part.substr(0, dash), 0, 9999999);
    Expected<int> last = dash == std::string::npos ? first : parseInt(flag, part.substr(dash + 1), 0, 9999999);
    if (!first || !last || *last < *first || *last - *first > 1000000) return bad;
    for (int r = *first; r <= *last; ++r) out.push_back(r);
    at = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
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
