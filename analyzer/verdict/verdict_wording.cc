// The wording every verdict shares: who a rank is, a culprit's next steps, empty jobs and data notes.
#include "hangwatch/verdict/verdict_wording.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/verdict/report.h"
#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

std::string VerdictWording::rankIn(const std::string& comm, int rank) const {
  if (!sequences_.sharedByProcess(comm)) return describeRank(job_, rank);
  const RankSummary* owner = nullptr;
  const SnapshotComm* c = sequences_.commEntry(comm, rank, &owner);
  std::string out = fmt::format("rank {}", rank);
  if (!c || !owner) return out;
  return fmt::format("{} (GPU {} of pid {}{})", out, c->device, owner->pid,
                     owner->host.empty() ? "" : " on host " + owner->host);
}

std::string VerdictWording::who(const std::string& comm, int rank) const {
  return sequences_.sharedByProcess(comm) ? rankIn(comm, rank)
                                          : fmt::format("rank {} ({})", rank, deviceText(job_, rank));
}

std::string VerdictWording::gpuIn(const std::string& comm, int rank) const {
  const RankSummary* owner = nullptr;
  const SnapshotComm* c = sequences_.sharedByProcess(comm) ? sequences_.commEntry(comm, rank, &owner) : nullptr;
  if (!c || !owner) return deviceText(job_, rank);
  return fmt::format("GPU {} of pid {} on host {}", c->device, owner->pid, owner->host.empty() ? "?" : owner->host);
}

std::string VerdictWording::hostIn(const std::string& comm, int rank) const {
  const RankSummary* owner = nullptr;
  const SnapshotComm* c = sequences_.sharedByProcess(comm) ? sequences_.commEntry(comm, rank, &owner) : nullptr;
  return c && owner ? owner->host : hostOf(job_, rank);
}

// Headline and next steps of a culprit link, whatever evidence named it.
void VerdictWording::linkCulprit(Verdict& v, const HangFocus& f, const Link& l) const {
  v.headline = fmt::format("Communication hang: the link from {} to {} stopped delivering during {}.", who(f.comm, l.from),
                           who(f.comm, l.to), opText(f));
  std::string a = hostIn(f.comm, l.from), b = hostIn(f.comm, l.to);
  std::string hosts = a == b || b.empty() ? "host " + (a.empty() ? std::string("?") : a) : "hosts " + a + " and " + b;
  v.next_steps.push_back(fmt::format(
      "Test the link {} -> {} (nccl-tests between these two GPUs; NVLink / InfiniBand error counters).",
      gpuIn(f.comm, l.from), gpuIn(f.comm, l.to)));
  v.next_steps.push_back("Drain " + hosts + " (or exclude that link) and restart the job from the last checkpoint.");
}

// Next steps for a culprit rank, whatever evidence named it.
void VerdictWording::rankCulpritSteps(Verdict& v, int rank) const {
  std::string host = hostOf(job_, rank);
  v.next_steps.push_back(fmt::format("Check {} (nvidia-smi, dmesg for Xid errors).", deviceText(job_, rank)));
  v.next_steps.push_back(fmt::format("Drain host {} and restart the job from the last checkpoint.",
                                     host.empty() ? fmt::format("of rank {}", rank) : host));
}

void VerdictWording::noDumps(Verdict& v, EmptyJob what) const {
  switch (what) {
    case EmptyJob::kTriggeredNoDumps:
      v.reason = "TRIGGER.json exists but no rank left a usable dump";
      v.headline = fmt::format("Inconclusive: {}.", v.reason);
      v.evidence.push_back(fmt::format("TRIGGER.json: reason {} on host {}.", job_.trigger->reason, job_.trigger->host));
      v.next_steps.push_back("Check that every rank can write to the dump directory and look at the ranks' stderr.");
      return;
    case EmptyJob::kNoSnapshotDumped:
      v.reason = job_.trigger_problem;
      v.headline = v.kind == VerdictKind::kNoHang
                       ? "No hang: no watchdog detected one (no TRIGGER.json, no rank dumps)."
                       : fmt::format("Inconclusive: {} and no rank dumped.", job_.trigger_problem);
      v.evidence.push_back(
          fmt::format("{} rank(s) wrote metrics windows; no rank wrote a hang snapshot.", job_.metrics_files));
      v.next_steps.push_back(
          "Nothing to do for a hang. If the job is slow rather than stuck, run forensics analyze on this directory.");
      return;
    case EmptyJob::kNothing:
      v.reason = "the job directory holds no TRIGGER.json, no rank dumps and no metrics";
      v.headline = fmt::format("Inconclusive: {}.", v.reason);
      v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and this HANGWATCH_DUMP_DIR / "
                             "HANGWATCH_JOB_ID.");
      return;
  }
}

void VerdictWording::noSnapshots(Verdict& v) const {
  v.reason = "no rank's watchdog snapshot could be read, so sequence numbers and pending operations are unknown";
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.hinges_on = "the watchdog snapshots, which no rank left";
  v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and that ranks/*.watchdog.json "
                         "are complete; then run forensics report again.");
}

void VerdictWording::nothingPending(Verdict& v) const {
  const std::string why = job_.trigger ? fmt::format("TRIGGER.json (reason {}) made {} rank(s) dump, but",
                                                     job_.trigger->reason, job_.ranks.size())
                                       : fmt::format("{} rank(s) dumped, but", job_.ranks.size());
  v.headline = "No hang: no rank has an operation pending or a thread blocked in NCCL.";
  v.evidence.push_back(fmt::format("{} no rank has a pending operation or a thread blocked in an NCCL call: any stall "
                                   "had cleared when they dumped.",
                                   why));
  v.next_steps.push_back("Nothing to do. If the job is slow rather than stuck, run forensics analyze on this directory.");
}

void VerdictWording::tooFewAnswered(Verdict& v, int answered, bool named) const {
  const std::string partial = named ? fmt::format(" (the partial data points to: {})", v.headline) : "";
  v.reason = fmt::format("too few ranks answered: {} of {}", answered, job_.world_size);
  v.evidence.insert(v.evidence.begin(),
                    fmt::format("Only {} of {} ranks left a usable dump{}.", answered, job_.world_size, partial));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.hinges_on = fmt::format("the dumps of the {} rank(s) that left none", job_.world_size - answered);
}

void VerdictWording::dataNotes(Verdict& v) const {
  if (job_.trigger) {
    const TriggerRecord& t = *job_.trigger;
    const std::string who = t.rank ? fmt::format("rank {}", *t.rank) : std::string("a manual trigger");
    const std::string what =
        t.stuck_op ? fmt::format(": {}{} pending for {}", t.stuck_op->op,
                                 t.stuck_op->seq ? fmt::format(" seq {}", *t.stuck_op->seq) : "",
                                 seconds(t.stuck_op->age_s))
                   : "";
    // A hang the framework declared itself (the watchdog's declared_hang.h) says who declared it.
    const std::string how = t.reason == "framework-signal" ? "the framework ended the process with SIGABRT, as "
                                                             "PyTorch's watchdog does after its own timeout"
                            : t.reason == "framework-abort" ? "the framework aborted the communicator (ncclCommAbort)"
                            : t.reason == "launcher-signal"
                                ? "the launcher was ending the job with SIGTERM (a time limit, scancel, or another "
                                  "rank's failure under --kill-on-bad-exit)"
                                : t.reason;
    v.evidence.push_back(fmt::format("First detected by {} on host {} ({}){}.", who, t.host, how, what));
  }
  if (!job_.ranks_missing.empty()) {
    v.evidence.push_back(fmt::format("Rank(s) {} left no usable dump; the verdict uses the other {}.",
                                     ranksText(job_.ranks_missing), job_.ranks.size()));
  }
  if (!job_.ranks_collecting.empty()) {
    v.evidence.push_back(fmt::format("Rank(s) {} were still being collected when this report was made: run it again "
                                     "(forensics report --wait) for their data.",
                                     ranksText(job_.ranks_collecting)));
  }
}

void VerdictWording::culpritWithoutSnapshot(Verdict& v, int rank) const {
  v.hinges_on =
      fmt::format("rank {}'s snapshot: whether its GPU stopped inside the collective or it never called it", rank);
}

void VerdictWording::whereCulpritsAre(Verdict& v) const {
  std::set<int> said;
  for (const CulpritStack& c : v.where) {
    if (c.frames.empty() || !said.insert(c.rank).second) continue;
    const size_t shown = std::min<size_t>(c.frames.size(), 4);
    v.evidence.push_back(fmt::format("Rank {} thread {} is in {}.", c.rank, c.thread,
                                     fmt::join(c.frames.begin(), c.frames.begin() + shown, " <- ")));
  }
}

}  // namespace hangwatch::verdict
