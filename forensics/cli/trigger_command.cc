#include "hangwatch/forensics/cli/trigger_command.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/trigger_beacon.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch::forensics {

std::string TriggerCommand::usage() const {
  return "usage: forensics trigger <job-dir>\n"
         "\n"
         "Creates <job-dir>/TRIGGER.json (reason \"manual\") unless one exists and says so in\n"
         "<job-dir>/TRIGGER.beacon: every rank's watchdog sees it and dumps. In a restarted job\n"
         "this is the newest attempt's folder (<job-dir>/attempts/<name>/). Exit 0 when created,\n"
         "1 when a trigger exists already.\n";
}

int TriggerCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  if (args.size() != 1) return usageError(args.empty() ? "missing <job-dir>" : "expected one <job-dir>");
  if (!args[0].empty() && args[0][0] == '-') return usageError("unknown option '" + args[0] + "'");
  Expected<ChosenAttempt> chosen = chooseAttemptFor(name(), args[0], "");
  if (!chosen) {
    std::cerr << "forensics trigger: " << chosen.error() << "\n";
    return 1;
  }
  const std::string& dir = chosen->entry.dir;
  TriggerRecord t;
  t.host = hostName();
  t.pid = ::getpid();
  t.time_unix_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  t.reason = "manual";
  std::string path = triggerPath(dir);
  Expected<bool> created = createFileExclusively(path, toJson(t).dump(1) + "\n");
  if (!created) {
    std::cerr << "forensics trigger: " << created.error() << "\n";
    return 1;
  }
  if (!*created) {
    std::cerr << "forensics trigger: " << path << " exists already: this job was triggered before; "
              << "remove it to trigger again\n";
    return 1;
  }
  // The watchdogs look at the beacon, which NFS keeps fresh, not at TRIGGER.json itself.
  if (Expected<bool> said = TriggerBeacon(dir).append(beaconTriggerLine(-1, t.host, t.pid, t.time_unix_s)); !said)
    std::cerr << "forensics trigger: warning: " << said.error() << "; ranks notice TRIGGER.json within a few seconds\n";
  std::cout << "forensics trigger: created " << path << "\n";
  return 0;
}

}  // namespace hangwatch::forensics
