// The wording of hangs around a communicator's lifetime: one that never formed, ranks
// held in another's init, ranks that exited inside a collective.
#include "hangwatch/verdict/verdict_wording.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/verdict/report.h"
#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

void VerdictWording::notFormed(Verdict& v, const FormingComm& c) const {
  const std::string what = fmt::format("the {}-rank communicator {}", c.size, c.comm);
  v.evidence.push_back(fmt::format("Rank(s) {} are inside {} for {}, the oldest for {}; NCCL returns from it on no "
                                   "member until every member has called it.",
                                   ranksText(c.waiting), c.call, what, seconds(c.oldest_s)));
  if (c.absent.empty()) {
    v.reason = fmt::format("every member of {} is inside {}: its bootstrap does not complete", what, c.call);
    v.headline = fmt::format("Inconclusive: {}.", v.reason);
    v.next_steps.push_back(
        "Check the network between the hosts (the bootstrap's TCP connections, NCCL_SOCKET_IFNAME) and that every "
        "rank was given the same unique id; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP shows where it stops.");
    return;
  }
  std::vector<int> absent = c.absent;
  v.evidence.push_back(fmt::format("No snapshot shows the communicator's rank(s) {} inside the call.",
                                   ranksText(absent)));
  for (int r : c.whole_job ? c.outside : std::vector<int>{}) {
    const RankSummary* s = job_.find(r);
    std::string pending;
    for (const SnapshotPendingOp& op : s ? s->pending : std::vector<SnapshotPendingOp>{})
      if (pending.size() < 80) pending += (pending.empty() ? "" : ", ") + op.op;
    v.evidence.push_back(describeRank(job_, r) + ": not inside " + c.call + (s && s->comms.empty() ? ", no communicator made" : "") +
                         "; " + (pending.empty() ? "no GPU work pending, so it is in host code." : "pending on its streams: " + pending + "."));
  }
  for (const ExitedRank& e : job_.ranks_exited)
    if (std::count(c.exited.begin(), c.exited.end(), e.rank))
      v.evidence.push_back(fmt::format("Rank {}'s process (pid {} on {}) {} when rank {} of its node dumped: it can "
                                       "never join.",
                                       e.rank, e.pid, e.host, e.stopped ? "was stopped (frozen)" : "had exited",
                                       e.seen_by));
  if (!c.silent.empty())
    v.evidence.push_back(ranksPhrase(c.silent) + " left no snapshot: " + (c.silent.size() == 1 ? "it" : "they") +
                         " may be inside it or not have called it either.");
  if (!v.culprit_ranks.empty()) {
    v.headline = fmt::format("Non-communication hang: rank(s) {} never called {} for {}, which rank(s) {} wait in.",
                             ranksText(v.culprit_ranks), c.call, what, ranksText(c.waiting));
    if (!c.outside.empty())
      v.next_steps.push_back("Not a network or GPU fault: rank(s) " + ranksText(c.outside) +
                             " never reached the communicator's creation (see where below: a data loader, a lock, a "
                             "loop, a different code path). Fix the program or its input and restart; draining hosts "
                             "will not help.");
    if (!c.exited.empty())
      v.next_steps.push_back("Find why rank(s) " + ranksText(c.exited) +
                             " died before joining: the job's log of that rank, dmesg on its host for the OOM killer, a "
                             "core file.");
    return;
  }
  if (c.whole_job) {
    v.hinges_on = fmt::format("the snapshots of rank(s) {}: inside {} or not", ranksText(c.silent), c.call);
    v.headline = fmt::format("Non-communication hang, not confident: {} waits for rank(s) {}, which left no snapshot.",
                             what, ranksText(c.silent));
  } else {
    v.reason = fmt::format("{} waits for {} member(s) and the snapshots do not tie members of it to processes",
                           what, absent.size());
    v.hinges_on = "which processes are the communicator's missing members";
    v.headline = fmt::format("Inconclusive: {}; the ranks outside it are suspects.", v.reason);
  }
  v.next_steps.push_back("Look at where the suspect ranks are (their stacks below, or py-spy dump on their hosts): "
                         "the member that never called init is in host code.");
}

void VerdictWording::idsDisagree(Verdict& v, const std::vector<StrayInit>& strays, const FormingComm* own,
                                 const std::vector<int>& makers) const {
  std::vector<int> stray_ranks;
  bool from_earlier = false;
  for (const StrayInit& s : strays) {
    const FormingComm& f = s.comm;
    stray_ranks.insert(stray_ranks.end(), f.waiting.begin(), f.waiting.end());
    std::string whose = "no rank of this launch made that id with ncclGetUniqueId";
    if (s.earlier) {
      from_earlier = true;
      whose += fmt::format(": rank {} of attempt {}, an earlier launch of this job, made it, and that id's bootstrap "
                           "root (a thread of its maker) ended with that launch",
                           s.earlier->rank, s.earlier->attempt);
    }
    v.evidence.push_back(fmt::format("Rank(s) {} are inside {} for the {}-rank communicator {} (their unique id's hash), "
                                     "the oldest for {}: {}.",
                                     ranksText(f.waiting), f.call, f.size, f.comm, seconds(f.oldest_s), whose));
  }
  std::sort(stray_ranks.begin(), stray_ranks.end());
  if (own)
    v.evidence.push_back(fmt::format("Rank(s) {} are inside {} for the {}-rank communicator {}, the oldest for {}; its "
                                     "id was made here by rank(s) {}. It waits for the positions the rank(s) above "
                                     "hold in the other id's communicator.",
                                     ranksText(own->waiting), own->call, own->size, own->comm,
                                     seconds(own->oldest_s), ranksText(makers)));
  v.evidence.push_back("NCCL joins only ranks that pass the same ncclUniqueId: an init with an id whose maker is gone, "
                       "or that the other members do not hold, can never complete.");
  v.reason = fmt::format("rank(s) {} passed ncclCommInitRank a unique id that no rank of this launch made{}",
                         ranksText(stray_ranks), from_earlier ? ", one an earlier launch made" : "");
  if (v.confident)
    v.headline = fmt::format("Non-communication hang: rank(s) {} joined with {}: {} can form.", ranksText(stray_ranks),
                             from_earlier ? "the unique id of an earlier launch of this job"
                                          : "another unique id than rank(s) " + ranksText(own->waiting) +
                                                " (an id from an earlier launch?)",
                             own ? "neither communicator" : "its communicator never");
  else
    v.headline = fmt::format("Non-communication hang, not confident: rank(s) {} joined with a unique id no rank "
                             "that dumped lists as made; a rank without a snapshot, or one that made more ids than "
                             "its snapshot keeps, may have made it.",
                             ranksText(stray_ranks));
  if (!v.confident)
    v.hinges_on = "whether another rank made the other id (one without a snapshot, or an id older than a snapshot keeps)";
  v.next_steps.push_back(
      "Not a network or GPU fault: find how rank(s) " + ranksText(stray_ranks) +
      " got their ncclUniqueId. A restarted job that reads it from a store kept across restarts gets the last "
      "attempt's id when it reads before the new one is written: torchrun's agent store (pytorch#135712; "
      "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 gives each attempt its own store). Otherwise the id's broadcast mixed "
      "up two communicators.");
}

void VerdictWording::exitedInside(Verdict& v, const HangFocus& f, const std::vector<ExitedRank>& exited) const {
  std::vector<std::string> said;
  std::vector<int> gone, frozen;
  for (const ExitedRank& e : exited) {
    (e.stopped ? frozen : gone).push_back(e.rank);
    said.push_back(fmt::format("Rank {}'s process (pid {} on {}) {} when rank {} of its node dumped{}; {} can never "
                               "complete without it.",
                               e.rank, e.pid, deviceText(job_, e.rank),
                               e.stopped ? "was stopped (state T: SIGSTOP or a job-control stop)" : "had exited",
                               e.seen_by, e.note.empty() ? "" : " (" + e.note + ")", opText(f)));
  }
  v.evidence.insert(v.evidence.begin(), said.begin(), said.end());
  std::vector<std::string> what;
  if (!gone.empty()) what.push_back(fmt::format("rank(s) {} exited", ranksText(gone)));
  if (!frozen.empty()) what.push_back(fmt::format("rank(s) {} frozen (process stopped)", ranksText(frozen)));
  v.headline = fmt::format("Communication hang: {}; the others wait for {} in {}.", fmt::join(what, ", "),
                           exited.size() == 1 ? "it" : "them", opText(f));
  v.next_steps.clear();
  if (!gone.empty())
    v.next_steps.push_back(fmt::format(
        "Find why rank(s) {} died: the job's log of that rank (a Python traceback, an assertion), dmesg on its host "
        "for the OOM killer or an Xid error, a core file. Then restart from the last checkpoint.",
        ranksText(gone)));
  for (const ExitedRank& e : exited)
    if (e.stopped)
      v.next_steps.push_back(fmt::format(
          "Rank {} is frozen, not dead: find who stopped pid {} on {} (a debugger or tracer left attached, a ^Z in an "
          "interactive shell, a job-control or checkpoint tool). `kill -CONT {}` lets it go on; else restart from "
          "the last checkpoint. No hardware is at fault.",
          e.rank, e.pid, e.host, e.pid));
}

void VerdictWording::lostByNetwork(Verdict& v, const HangFocus& f, int lost, const std::vector<int>& seen_by) const {
  v.evidence.insert(
      v.evidence.begin(),
      {fmt::format("NCCL on rank(s) {} failed communicator {} with ncclRemoteError (ncclCommGetAsyncError when they "
                   "dumped): NCCL's proxy lost a peer across the network, whose connection closed or stopped "
                   "answering. A process that is alive, even stopped, keeps its connections and dumps.",
                   ranksText(seen_by), f.comm),
       fmt::format("Rank {} ({}) left no file at all, the only member of {} that did not: it is the peer NCCL lost; "
                   "{} can never complete without it.",
                   lost, deviceText(job_, lost), f.comm, opText(f))});
  v.headline = fmt::format("Communication hang: rank {} is gone (its process ended, or its node or network went with "
                           "it); the others wait for it in {}.",
                           lost, opText(f));
  v.next_steps.clear();
  v.next_steps.push_back(fmt::format(
      "Find why rank {} went: the job's log of that rank (a Python traceback, an assertion, a kill by the OOM killer), "
      "dmesg on its host (OOM, Xid errors), whether the host is up at all and reachable over the network (its NIC's "
      "link and counters). Then restart from the last checkpoint without that host if it is down.",
      lost));
}

void VerdictWording::unansweredRas(Verdict& v, const HangFocus& f, int lost,
                                  const std::vector<RasSighting>& seen) const {
  std::vector<int> askers;
  bool dead = false;
  bool collector_off = true;
  for (const RasSighting& s : seen) {
    if (!std::count(askers.begin(), askers.end(), s.asked_by)) askers.push_back(s.asked_by);
    dead = dead || s.member.considered_dead;
    collector_off = collector_off && s.collector_off;
  }
  const RasMember& m = seen.front().member;
  // Its own files said nothing of where it ran (it wrote none): RAS's word for it.
  std::string placed = deviceText(job_, lost);
  if (placed.find("unknown") != std::string::npos && m.cuda_dev >= 0 && !m.host.empty())
    placed = fmt::format("GPU {} on host {}, as RAS has it", m.cuda_dev, m.host);
  v.evidence.insert(
      v.evidence.begin(),
      {fmt::format("NCCL's RAS, asked {} rank(s) {} {}, lists rank {} of "
                   "communicator {}{} missing: its process (pid {} on {}, GPU {}) did not answer{}. RAS runs in every "
                   "NCCL process beside NCCL's transport; a process that is alive and running answers it.",
                   collector_off ? "from the node of" : "by the collector of", ranksText(askers),
                   collector_off ? "with nothing stopped (the collector was off)" : "before it stopped anything",
                   m.rank, f.comm, m.rank == lost ? "" : fmt::format(" (rank {} of the job)", lost), m.pid, m.host.empty() ? "an unknown host" : m.host, m.cuda_dev,
                   dead ? " (RAS considers it dead: unreachable for 60 s)" : ""),
       fmt::format("Rank {} ({}) left no file at all, the only member of {} that did not; {} can never complete "
                   "without it.",
                   lost, placed, f.comm, opText(f))});
  v.headline = fmt::format("Communication hang: rank {} does not answer (its process ended or is stopped, or its node "
                           "or network is gone); the others wait for it in {}.",
                           lost, opText(f));
  v.next_steps.clear();
  v.next_steps.push_back(fmt::format(
      "Find what happened to rank {} (pid {} on {}): whether the process is still there (a stopped one, state T, "
      "goes on with `kill -CONT {}`), the job's log of that rank (a Python traceback, a kill by the OOM killer), "
      "dmesg on its host (OOM, Xid errors), whether the host is up and reachable (its NIC's link and counters). "
      "Then restart from the last checkpoint without that host if it is down.",
      lost, m.pid, m.host.empty() ? "its host" : m.host, m.pid));
}

void VerdictWording::frozenThenContinued(Verdict& v, const std::vector<ExitedRank>& frozen) const {
  std::vector<std::string> said;
  for (const ExitedRank& e : frozen) {
    said.push_back(fmt::format("Rank {}'s process (pid {} on {}) was stopped (state T: SIGSTOP or a job-control stop) "
                               "when rank {} of its node dumped; continued since (a launcher sends SIGCONT before its "
                               "SIGTERM), it dumped itself: its dump shows where it was frozen.",
                               e.rank, e.pid, deviceText(job_, e.rank), e.seen_by));
    if (std::count(v.culprit_ranks.begin(), v.culprit_ranks.end(), e.rank) == 0) continue;
    v.headline += fmt::format(" Rank {}'s process had been frozen (stopped).", e.rank);
    v.next_steps.insert(v.next_steps.begin(),
                        fmt::format("Rank {} was frozen, not broken: find who stopped pid {} on {} (a debugger or tracer "
                                    "left attached, a ^Z in an interactive shell, a job-control or checkpoint tool). It "
                                    "was continued since; if it is stopped again, `kill -CONT {}` lets it go on.",
                                    e.rank, e.pid, e.host, e.pid));
  }
  v.evidence.insert(v.evidence.begin(), said.begin(), said.end());
}

void VerdictWording::heldInInit(Verdict& v, const std::vector<int>& ranks) const {
  std::vector<int> held = ranks;
  v.evidence.push_back(fmt::format("{} never called it either, but {} inside ncclCommInitRank for another "
                                   "communicator, waiting for its other members: held up, not a culprit.",
                                   ranksPhrase(held), held.size() == 1 ? "is" : "are"));
}

}  // namespace hangwatch::verdict
