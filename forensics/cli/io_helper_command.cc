#include "hangwatch/forensics/cli/io_helper_command.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <iostream>

#include "hangwatch/common/dump_fs_remote.h"

namespace hangwatch::forensics {

std::string IoHelperCommand::usage() const {
  return "usage: forensics io-helper --fd N\n"
         "\n"
         "Started by libhangwatch.so, one per rank: does the rank's file operations on the dump\n"
         "folder (write a file atomically, read one, append a line) as the rank asks over the\n"
         "socket N, so that a mount that stalls forever holds this process in the kernel and\n"
         "never a thread of the training job. Exits when the rank closes the socket or ends\n"
         "(SIGHUP): a file it is writing then is finished first, within 3 s.\n";
}

int IoHelperCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  OptionCursor cur{args};
  int fd = -1;
  while (!cur.done()) {
    std::string value;
    Expected<bool> got = cur.take("--fd", value);
    if (!got) return usageError(got.error());
    if (!*got) return usageError("unknown option '" + args[cur.i] + "'");
    Expected<int> n = parseInt("--fd", value, 0, 1 << 20);
    if (!n) return usageError(n.error());
    fd = *n;
  }
  if (fd < 0) return usageError("missing --fd");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::cerr << "forensics io-helper: fd " << fd << " is not a socket (this command is started by the watchdog)\n";
    return 2;
  }
  // Nobody may read what it prints: a closed stderr is no reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  // The rank's end is SIGHUP (its PR_SET_PDEATHSIG): the file being written is finished first.
  return serveDumpFs(fd, kHelperParentGoneSignal);
}

}  // namespace hangwatch::forensics
