#include "hangwatch/forensics/cli/collect_command.h"

#include <cstdlib>
#include <iostream>

#include "hangwatch/forensics/cli/node_summary_command.h"

namespace hangwatch::forensics {

std::string CollectCommand::usage() const {
  return "usage: forensics collect --pid PID [--rank R [--state [--node RANKS]]] --out DIR\n"
         "                         [--backend auto|cuda|sim|host] [--timeout-fast SECONDS] [--timeout-debugger SECONDS]\n"
         "                         [--no-ras]\n"
         "\n"
         "Takes the native and Python stacks of every thread of PID in a fast ptrace pass,\n"
         "lets go, then (backend sim/cuda) runs a debugger for device and ring state:\n"
         "$HANGWATCH_DEBUGGER if set, else gdb for sim and cuda-gdb for cuda (gdb when there is\n"
         "no cuda-gdb: NCCL's host structures only, said in the dump). On cuda the communicators\n"
         "come from DIR/ranks/rNNNNN.watchdog.json. Writes DIR/ranks/rNNNNN.forensics.json, or\n"
         "DIR/ranks/p<PID>.forensics.json without --rank. The target is never left stopped.\n"
         "\n"
         "  --backend auto       decided from the process: sim if simgpu is loaded, cuda if the real\n"
         "                       libnccl.so.2 / libcuda.so.1 is, else host (no ring reader)\n"
         "  --backend host       stacks only, no debugger\n"
         "  --state              record collecting/done in DIR/ranks/rNNNNN.state.json (the\n"
         "                       watchdog passes it; abort mode and report --wait read it)\n"
         "  --node RANKS         the ranks of this node (\"0-7\"): when this rank is done, the node's\n"
         "                       last collector merges their files into DIR/nodes/<host>.json, which\n"
         "                       `report` reads instead of theirs (see forensics node-summary --help)\n"
         "  --timeout-fast S     hard bound of the ptrace pass (default 10)\n"
         "  --timeout-debugger S hard bound of the debugger phase (default 60)\n"
         "  --no-ras             do not ask NCCL's RAS (NCCL_RAS_ADDR of the process, else\n"
         "                       localhost:28028) for the job's communicators; by default the lowest\n"
         "                       rank of --node asks it once, before stopping anything (at most 20 s)\n"
         "\n"
         "exit: 0 done; 1 no stacks (bad pid, zombie, permission, already traced, exited);\n"
         "      2 usage; 3 stacks taken but a later phase failed (see the dump's errors)\n";
}

Expected<CollectOptions> CollectCommand::parse(const std::vector<std::string>& args, const char* debugger_env) {
  CollectOptions o;
  bool have_pid = false;
  OptionCursor c{args};
  while (!c.done()) {
    if (args[c.i] == "--state") {
      o.mark_state = true;
      ++c.i;
      continue;
    }
    if (args[c.i] == "--no-ras") {
      o.ask_ras = false;
      ++c.i;
      continue;
    }
    std::string v;
    std::string error;
    auto is = [&](const char* flag) {
      Expected<bool> hit = c.take(flag, v);
      if (!hit) error = hit.error();
      return !hit || *hit;
    };
    if (is("--pid")) {
      auto pid = error.empty() ? parseInt("--pid", v, 1, 0x7fffffff) : Expected<int>(Error{error});
      if (!pid) return Error{pid.error()};
      o.pid = *pid;
      have_pid = true;
    } else if (is("--rank")) {
      auto rank = error.empty() ? parseInt("--rank", v, 0, 9999999) : Expected<int>(Error{error});
      if (!rank) return Error{rank.error()};
      o.rank = *rank;
    } else if (is("--out")) {
      if (!error.empty()) return Error{error};
      if (v.empty()) return Error{"--out needs a directory"};
      o.out_dir = v;
    } else if (is("--node")) {
      if (!error.empty()) return Error{error};
      Expected<std::vector<int>> ranks = parseRanks("--node", v);
      if (!ranks) return Error{ranks.error()};
      o.node_ranks = std::move(*ranks);
    } else if (is("--backend")) {
      if (!error.empty()) return Error{error};
      if (v != "auto" && v != "cuda" && v != "sim" && v != "host") {
        return Error{"--backend must be auto, cuda, sim or host, got '" + v + "'"};
      }
      o.backend = v;
    } else if (is("--timeout-fast")) {
      auto s = error.empty() ? parseSeconds("--timeout-fast", v) : Expected<double>(Error{error});
      if (!s) return Error{s.error()};
      o.timeout_fast_s = *s;
    } else if (is("--timeout-debugger")) {
      auto s = error.empty() ? parseSeconds("--timeout-debugger", v) : Expected<double>(Error{error});
      if (!s) return Error{s.error()};
      o.timeout_debugger_s = *s;
    } else {
      return Error{"unknown argument '" + args[c.i] + "'"};
    }
  }
  if (!have_pid) return Error{"--pid is required"};
  if (o.out_dir.empty()) return Error{"--out is required"};
  if (o.mark_state && !o.rank) return Error{"--state needs --rank"};
  if (!o.node_ranks.empty() && !o.mark_state) return Error{"--node needs --state (it reads the node's state files)"};
  if (debugger_env != nullptr) o.debugger = debugger_env;
  return o;
}

int CollectCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  Expected<CollectOptions> options = parse(args, std::getenv("HANGWATCH_DEBUGGER"));
  if (!options) return usageError(options.error());
  CollectResult r = Collector(*options).run();
  std::ostream& out = r.exit_code == kCollectOk ? std::cout : std::cerr;
  out << "forensics collect: pid " << options->pid << ": " << r.summary << "\n";
  if (!r.dump_path.empty()) std::cout << "forensics collect: wrote " << r.dump_path << "\n";
  if (!options->node_ranks.empty()) summarizeNodeAfterCollect(options->out_dir, options->node_ranks, std::cout);
  return r.exit_code;
}

}  // namespace hangwatch::forensics
