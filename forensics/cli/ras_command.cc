#include "hangwatch/forensics/cli/ras_command.h"

#include <iostream>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/forensics/ras_client.h"

namespace hangwatch::forensics {

std::string RasCommand::usage() const {
  return "usage: forensics ras --pid PID [--rank R --out DIR] [--bound SECONDS]\n"
         "\n"
         "Asks NCCL's RAS service (NCCL 2.24+; at the process's NCCL_RAS_ADDR, else localhost:28028)\n"
         "for the status of the job's communicators, as process PID's NCCL sees them: which\n"
         "members' processes answered and which did not (a process that ended, is stopped, or lost\n"
         "its node or network). Nothing is stopped or attached to. With --out, writes\n"
         "DIR/ranks/rNNNNN.ras.json, which `report` reads as evidence; else prints the answer.\n"
         "\n"
         "The watchdog of a node's lowest rank runs it after a hang when HANGWATCH_COLLECT=0 (a\n"
         "collector asks RAS itself).\n"
         "\n"
         "  --pid PID      a process of the job, on this node, with NCCL loaded\n"
         "  --rank R       that process's rank: names the file (needed with --out)\n"
         "  --out DIR      the job's dump folder (this launch's)\n"
         "  --bound S      the longest to wait for the whole answer (default 20: RAS waits 5 s for\n"
         "                 a member that does not answer, 5 s more for the collective)\n"
         "\n"
         "exit: 0 RAS answered; 1 nothing asked (process gone, no NCCL, RAS off) or no answer\n"
         "      (the file is written all the same, with why); 2 usage; 3 the file could not be written\n";
}

Expected<RasCommandOptions> RasCommand::parse(const std::vector<std::string>& args) {
  RasCommandOptions o;
  std::string pid_text, rank_text, bound_text;
  OptionCursor cur{args};
  while (!cur.done()) {
    Expected<bool> took = cur.take("--pid", pid_text);
    if (took && !*took) took = cur.take("--rank", rank_text);
    if (took && !*took && (took = cur.take("--out", o.out_dir)) && *took && o.out_dir.empty())
      return Error{"--out needs a directory"};
    if (took && !*took) took = cur.take("--bound", bound_text);
    if (!took) return Error{took.error()};
    if (!*took) return Error{"unknown argument '" + args[cur.i] + "'"};
  }
  if (pid_text.empty()) return Error{"--pid is required"};
  Expected<int> pid = parseInt("--pid", pid_text, 1, 0x7fffffff);
  if (!pid) return Error{pid.error()};
  o.pid = *pid;
  if (!rank_text.empty()) {
    Expected<int> rank = parseInt("--rank", rank_text, 0, 9999999);
    if (!rank) return Error{rank.error()};
    o.rank = *rank;
  }
  if (!bound_text.empty()) {
    Expected<double> bound = parseSeconds("--bound", bound_text);
    if (!bound) return Error{bound.error()};
    o.bound_s = *bound;
  }
  if (!o.out_dir.empty() && !o.rank) return Error{"--out needs --rank (the file is named by rank)"};
  return o;
}

int RasCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  Expected<RasCommandOptions> o = parse(args);
  if (!o) return usageError(o.error());
  const RasAnswer answer = askRasForProcess(o->pid, o->rank, o->bound_s);
  const std::string text = toJson(answer).dump(1) + "\n";
  const bool answered = answer.ras.error.empty();
  // Printed, stdout holds the JSON alone (for jq and the like): what happened goes to stderr then.
  std::ostream& said = answered && !o->out_dir.empty() ? std::cout : std::cerr;
  if (answered)
    said << fmt::format("forensics ras: {} answered in {:.1f} s: {} communicator(s)\n", answer.ras.address,
                        answer.ras.seconds, answer.ras.communicators.size());
  else
    said << "forensics ras: pid " << o->pid << ": " << answer.ras.error << "\n";
  if (o->out_dir.empty()) {
    std::cout << text;
    return answered ? 0 : 1;
  }
  const std::string path = rasAnswerPath(o->out_dir, *o->rank);
  (void)makeDumpDirs(ranksDir(o->out_dir));
  Expected<Written> written = writeFileAtomically(path, text, dumpFileMode());
  if (!written) {
    std::cerr << "forensics ras: " << written.error() << "\n";
    return 3;
  }
  std::cout << "forensics ras: wrote " << written->path << "\n";
  return answered ? 0 : 1;
}

}  // namespace hangwatch::forensics
