#include "hangwatch/verdict/verdict_maker.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <span>

#include "hangwatch/rank_set.h"
#include "hangwatch/verdict/report.h"
#include "hangwatch/verdict/ring_progress_analysis.h"

namespace hangwatch::verdict {
namespace {

std::string ranksText(const std::vector<int>& ranks) {
  stackmerge::RankSet set;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int r : sorted) set.insert(r);
  return set.toString();
}

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

std::string opText(const HangFocus& f) {
  return (f.op.empty() ? std::string("collective") : f.op) + " seq " + std::to_string(f.seq) + " on communicator " +
         f.comm;
}

std::string hostOf(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  return s && !s->host.empty() ? s->host : "";
}

std::string deviceText(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  std::string host = s && !s->host.empty() ? s->host : "unknown host";
  std::string gpu = s && s->device ? "GPU " + std::to_string(*s->device) : "unknown GPU";
  return gpu + " on host " + host;
}

// Helper threads that look the same on every rank are no evidence; threads named after
// simgpu channels or hangwatch are never where a culprit stands.
bool isInfrastructureThread(const std::string& name) {
  return name.rfind("simnccl", 0) == 0 || name.rfind("simgpu", 0) == 0 || name.rfind("hangwatch", 0) == 0;
}

std::vector<std::string> whereFrames(std::span<const stackmerge::TableFrame> frames) {
  using stackmerge::TableFrame;
  std::vector<std::string> out;
  bool python = std::any_of(frames.begin(), frames.end(), [](const TableFrame& f) { return f.kind == FrameKind::kPython; });
  if (python) {
    // The Python frames say where the program is; the innermost native frame says what it waits on.
    if (!frames.empty() && frames.front().kind == FrameKind::kNative) out.emplace_back(frames.front().label);
    for (const TableFrame& f : frames) {
      if (f.kind == FrameKind::kPython && out.size() < 8) out.emplace_back(f.label);
    }
    return out;
  }
  for (const TableFrame& f : frames) {
    if (out.size() >= 8) break;
    out.emplace_back(f.label);
  }
  return out;
}

}  // namespace

std::string describeRank(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  std::string out = "rank " + std::to_string(rank);
  if (!s) return out + " (no dump)";
  std::string inner;
  if (!s->host.empty()) inner += "host " + s->host;
  if (s->device) inner += (inner.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(*s->device);
  if (s->pid) inner += (inner.empty() ? "" : ", ") + std::string("pid ") + std::to_string(s->pid);
  return inner.empty() ? out : out + " (" + inner + ")";
}

Verdict VerdictMaker::decide() const {
  Verdict v;
  int with_snapshot = static_cast<int>(std::count_if(job_.ranks.begin(), job_.ranks.end(),
                                                     [](const RankSummary& s) { return s.has_snapshot; }));
  if (job_.ranks.empty()) {
    v = noDumps();
  } else if (with_snapshot == 0) {
    v.kind = VerdictKind::kInconclusive;
    v.reason = "no rank's watchdog snapshot could be read, so sequence numbers and pending operations are unknown";
    v.headline = "Inconclusive: " + v.reason + ".";
    v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and that ranks/*.watchdog.json "
                           "are complete; then run forensics report again.");
  } else if (std::optional<HangFocus> f = sequences_.focus()) {
    CommPositions p = sequences_.positions(*f);
    if (p.groups.size() > 1 || !p.ahead.empty()) {
      v = mismatch(*f, p);
    } else if (!p.behind.empty()) {
      v = notInCollective(*f, p, p.behind);
    } else {
      v = fromRingProgress(*f, p);
    }
  } else if (sequences_.ranksWithPendingWork().empty()) {
    v = nothingPending();
  } else {
    // Work is pending but no collective: a GEMM, kernel or copy that never finished.
    std::vector<int> stuck;
    for (const RankSummary& s : job_.ranks) {
      for (const SnapshotPendingOp& op : s.pending) {
        if (s.timeout_s > 0 && op.age_s >= s.timeout_s) {
          stuck.push_back(s.rank);
          v.evidence.push_back(describeRank(job_, s.rank) + " has " + op.op + " pending for " + seconds(op.age_s) +
                               " (timeout " + seconds(s.timeout_s) + ").");
          break;
        }
      }
    }
    if (stuck.empty()) {
      v.kind = VerdictKind::kInconclusive;
      v.reason = "operations are pending but none is a collective and none is older than the timeout";
      v.headline = "Inconclusive: " + v.reason + ".";
    } else {
      v.kind = VerdictKind::kNonCommunicationHang;
      v.culprit_ranks = stuck;
      v.headline = "Non-communication hang: rank(s) " + ranksText(stuck) + " wait on a GPU operation outside any collective.";
      v.next_steps.push_back("Check the GPU(s) of rank(s) " + ranksText(stuck) + " (nvidia-smi, dmesg for Xid errors) "
                             "and the kernel named above; drain the host if the GPU is faulty.");
    }
  }

  int answered = static_cast<int>(job_.ranks.size());
  if (v.kind != VerdictKind::kNoHang && job_.world_size > 0 && answered * 2 < job_.world_size) {
    std::string partial = v.culprit_link || !v.culprit_ranks.empty() ? " (the partial data points to: " + v.headline + ")" : "";
    v.kind = VerdictKind::kInconclusive;
    v.reason = "too few ranks answered: " + std::to_string(answered) + " of " + std::to_string(job_.world_size);
    v.evidence.insert(v.evidence.begin(), "Only " + std::to_string(answered) + " of " + std::to_string(job_.world_size) +
                                              " ranks left a usable dump" + partial + ".");
    v.headline = "Inconclusive: " + v.reason + ".";
    v.culprit_ranks.clear();
    v.culprit_link.reset();
  }
  addCulpritStacks(v);
  addDataNotes(v);
  return v;
}

Verdict VerdictMaker::noDumps() const {
  Verdict v;
  if (job_.trigger) {
    v.kind = VerdictKind::kInconclusive;
    v.reason = "TRIGGER.json exists but no rank left a usable dump";
    v.headline = "Inconclusive: " + v.reason + ".";
    v.evidence.push_back("TRIGGER.json: reason " + job_.trigger->reason + " on host " + job_.trigger->host + ".");
    v.next_steps.push_back("Check that every rank can write to the dump directory and look at the ranks' stderr.");
  } else if (job_.metrics_files > 0 || !job_.trigger_problem.empty()) {
    v.kind = job_.trigger_problem.empty() ? VerdictKind::kNoHang : VerdictKind::kInconclusive;
    v.reason = job_.trigger_problem;
    v.headline = v.kind == VerdictKind::kNoHang ? "No hang: no watchdog detected one (no TRIGGER.json, no rank dumps)."
                                                : "Inconclusive: " + job_.trigger_problem + " and no rank dumped.";
    v.evidence.push_back(std::to_string(job_.metrics_files) + " rank(s) wrote metrics windows; no rank wrote a hang snapshot.");
    v.next_steps.push_back("Nothing to do for a hang. If the job is slow rather than stuck, run forensics analyze on this directory.");
  } else {
    v.kind = VerdictKind::kInconclusive;
    v.reason = "the job directory holds no TRIGGER.json, no rank dumps and no metrics";
    v.headline = "Inconclusive: " + v.reason + ".";
    v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and this HANGWATCH_DUMP_DIR / "
                           "HANGWATCH_JOB_ID.");
  }
  return v;
}

Verdict VerdictMaker::nothingPending() const {
  Verdict v;
  v.kind = VerdictKind::kNoHang;
  std::string why = job_.trigger ? "TRIGGER.json (reason " + job_.trigger->reason + ") made " +
                                       std::to_string(job_.ranks.size()) + " rank(s) dump, but"
                                 : std::to_string(job_.ranks.size()) + " rank(s) dumped, but";
  v.headline = "No hang: no rank has an operation pending or a thread blocked in NCCL.";
  v.evidence.push_back(why + " no rank has a pending operation or a thread blocked in an NCCL call: "
                       "any stall had cleared when they dumped.");
  v.next_steps.push_back("Nothing to do. If the job is slow rather than stuck, run forensics analyze on this directory.");
  return v;
}

Verdict VerdictMaker::mismatch(const HangFocus& f, const CommPositions& p) const {
  Verdict v;
  v.kind = VerdictKind::kCollectiveMismatch;
  v.communicator = f.comm;
  v.op = OpRef{p.groups.empty() ? f.op : p.groups.front().op, f.seq};
  auto shape = [](const OpGroup& g) {
    return g.op + (g.count ? " (" + std::to_string(g.count) + " " + (g.dtype.empty() ? "elements" : g.dtype) + ")" : "");
  };
  std::vector<int> odd;
  for (size_t i = 1; i < p.groups.size(); ++i) odd.insert(odd.end(), p.groups[i].ranks.begin(), p.groups[i].ranks.end());
  odd.insert(odd.end(), p.ahead.begin(), p.ahead.end());
  // With two equal groups there is no majority: every rank of both is named.
  if (p.groups.size() > 1 && p.groups[0].ranks.size() == p.groups[1].ranks.size()) {
    odd.insert(odd.end(), p.groups[0].ranks.begin(), p.groups[0].ranks.end());
  }
  std::sort(odd.begin(), odd.end());
  v.culprit_ranks = odd;
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const OpGroup& g = p.groups[i];
    std::string who = "rank(s) " + ranksText(g.ranks) + " are";
    if (i > 0 && g.ranks.size() <= 4) {
      who.clear();
      for (int r : g.ranks) who += (who.empty() ? "" : ", ") + describeRank(job_, r);
      who += g.ranks.size() == 1 ? " is" : " are";
    }
    v.evidence.push_back("At seq " + std::to_string(f.seq) + " on communicator " + f.comm + ", " + who + " in " +
                         shape(g) + ".");
  }
  for (int r : p.ahead) {
    auto it = p.last_issued.find(r);
    v.evidence.push_back(describeRank(job_, r) + " is already in a later collective (last issued seq " +
                         (it != p.last_issued.end() && it->second ? std::to_string(*it->second) : "?") +
                         ") while the others wait at seq " + std::to_string(f.seq) + ": it skipped one.");
  }
  if (!p.groups.empty()) {
    v.headline = "Collective mismatch: rank(s) " + ranksText(odd) + " called a different collective than rank(s) " +
                 ranksText(p.groups.front().ranks) + " (" + shape(p.groups.front()) + ") at seq " +
                 std::to_string(f.seq) + " on communicator " + f.comm + ".";
  } else {
    v.headline = "Collective mismatch: rank(s) " + ranksText(odd) + " are at a different sequence number on communicator " + f.comm + ".";
  }
  int shown = 0;
  for (const RankSummary& s : job_.ranks) {
    for (const RingProgress& rp : s.ring_progress) {
      if (rp.comm != f.comm || !rp.mismatch || shown >= 4) continue;
      ++shown;
      v.evidence.push_back("Rank " + std::to_string(s.rank) + ", in " + rp.op + " seq " + std::to_string(rp.seq) +
                           ", received on channel " + std::to_string(rp.channel) + " a step of " +
                           rp.mismatch->arrived_op + " seq " + std::to_string(rp.mismatch->arrived_seq) + ".");
      break;
    }
  }
  v.next_steps.push_back("A program bug, not a hardware fault: find the code path where rank(s) " + ranksText(odd) +
                         " issue a different collective (a rank-dependent branch or uneven data); draining hosts will "
                         "not help. Restart after fixing it.");
  return v;
}

Verdict VerdictMaker::notInCollective(const HangFocus& f, const CommPositions& p, const std::vector<int>& culprits) const {
  Verdict v;
  v.kind = VerdictKind::kNonCommunicationHang;
  v.communicator = f.comm;
  v.op = OpRef{f.op, f.seq};
  v.culprit_ranks = culprits;
  std::vector<int> waiting;
  for (const OpGroup& g : p.groups) waiting.insert(waiting.end(), g.ranks.begin(), g.ranks.end());
  waiting.insert(waiting.end(), p.in_host_call.begin(), p.in_host_call.end());
  std::sort(waiting.begin(), waiting.end());
  v.headline = "Non-communication hang: rank(s) " + ranksText(culprits) + " never called " + opText(f) +
               ", which rank(s) " + ranksText(waiting) + " wait in.";
  for (int r : culprits) {
    auto li = p.last_issued.find(r);
    auto lc = p.last_completed.find(r);
    std::string last = li != p.last_issued.end() && li->second ? "seq " + std::to_string(*li->second) : "none";
    std::string done = lc != p.last_completed.end() && lc->second ? "seq " + std::to_string(*lc->second) : "none";
    const RankSummary* s = job_.find(r);
    std::string pending;
    if (s) {
      for (const SnapshotPendingOp& op : s->pending) {
        pending += (pending.empty() ? "" : ", ") + op.op;
        if (pending.size() > 80) break;
      }
    }
    v.evidence.push_back(describeRank(job_, r) + ": last collective issued on this communicator " + last +
                         ", last completed " + done + "; " +
                         (pending.empty() ? "no GPU work pending, so it is stuck in host code."
                                          : "pending on its streams: " + pending + "."));
  }
  if (!waiting.empty()) {
    double oldest = 0;
    for (int r : waiting) {
      if (const RankSummary* s = job_.find(r)) {
        for (const SnapshotPendingOp& op : s->pending) {
          if (op.comm == f.comm && op.seq && *op.seq == f.seq) oldest = std::max(oldest, op.age_s);
        }
      }
    }
    v.evidence.push_back("Rank(s) " + ranksText(waiting) + " have " + opText(f) + " pending, the oldest for " +
                         seconds(oldest) + ".");
  }
  v.next_steps.push_back("Not a network or GPU fault: rank(s) " + ranksText(culprits) +
                         " are stuck in host code (see where below: a data loader, a lock, a loop). Fix the program or "
                         "its input and restart from the last checkpoint; draining hosts will not help.");
  return v;
}

Verdict VerdictMaker::fromRingProgress(const HangFocus& f, const CommPositions& p) const {
  Verdict v;
  v.communicator = f.comm;
  v.op = OpRef{f.op, f.seq};
  RingProgressAnalysis ring([&](int comm_rank) { return sequences_.globalRank(f.comm, comm_rank); });
  int ranks_with_records = 0;
  for (const RankSummary& s : job_.ranks) {
    bool any = false;
    for (const RingProgress& r : s.ring_progress) {
      ring.add(r);
      any = any || r.comm == f.comm;
    }
    ranks_with_records += any;
  }
  RingFinding rf = ring.analyze(f.comm, f.seq);
  if (rf.channels_total == 0) rf = ring.analyze(f.comm, std::nullopt);
  std::vector<int> waiting;
  for (const OpGroup& g : p.groups) waiting.insert(waiting.end(), g.ranks.begin(), g.ranks.end());
  waiting.insert(waiting.end(), p.in_host_call.begin(), p.in_host_call.end());
  std::sort(waiting.begin(), waiting.end());
  std::string all_in = "Rank(s) " + ranksText(waiting) + " all wait in " + opText(f) +
                       (p.groups.empty() || !p.groups.front().count ? "" : " (" + std::to_string(p.groups.front().count) +
                                                                             " " + p.groups.front().dtype + ")") +
                       "; none is behind or in another collective.";
  v.evidence.push_back(all_in);
  for (int r : p.in_host_call) {
    v.evidence.push_back(describeRank(job_, r) + " has a host thread still blocked inside the " +
                         (f.op.empty() ? std::string("collective") : f.op) + " call itself.");
  }
  v.channels_total = rf.channels_total;
  v.channels_agree = rf.channels_agree;
  std::string channels = std::to_string(rf.channels_agree) + " of " + std::to_string(rf.channels_total) + " ring channel(s)";
  const ChannelFinding* example = nullptr;
  for (const ChannelFinding& c : rf.channels) {
    if ((rf.link && c.link && *c.link == *rf.link) || (rf.rank && c.rank && *c.rank == *rf.rank)) {
      example = &c;
      break;
    }
  }
  std::string steps = example ? " (it reached step " + std::to_string(example->least_progress) +
                                    ", the next-least connection step " + std::to_string(example->next_least) + ")"
                              : "";
  if (rf.link) {
    v.kind = VerdictKind::kCommunicationHang;
    v.culprit_link = rf.link;
    v.culprit_ranks = {rf.link->from, rf.link->to};
    std::sort(v.culprit_ranks.begin(), v.culprit_ranks.end());
    v.headline = "Communication hang: the link from rank " + std::to_string(rf.link->from) + " (" +
                 deviceText(job_, rf.link->from) + ") to rank " + std::to_string(rf.link->to) + " (" +
                 deviceText(job_, rf.link->to) + ") stopped delivering during " + opText(f) + ".";
    v.evidence.push_back("On " + channels + " the connection " + std::to_string(rf.link->from) + " -> " +
                         std::to_string(rf.link->to) + " made the least progress" + steps + ".");
    std::string a = hostOf(job_, rf.link->from), b = hostOf(job_, rf.link->to);
    std::string hosts = a == b || b.empty() ? "host " + (a.empty() ? std::string("?") : a) : "hosts " + a + " and " + b;
    v.next_steps.push_back("Test the link " + deviceText(job_, rf.link->from) + " -> " + deviceText(job_, rf.link->to) +
                           " (nccl-tests between these two GPUs; NVLink / InfiniBand error counters).");
    v.next_steps.push_back("Drain " + hosts + " (or exclude that link) and restart the job from the last checkpoint.");
  } else if (rf.rank) {
    v.kind = VerdictKind::kCommunicationHang;
    v.culprit_ranks = {*rf.rank};
    v.headline = "Communication hang: rank " + std::to_string(*rf.rank) + " (" + deviceText(job_, *rf.rank) +
                 ") stopped making progress inside " + opText(f) + "; its neighbours wait on it.";
    if (rf.channels_agree > 0) {
      v.evidence.push_back("On " + channels + " both ring connections of rank " + std::to_string(*rf.rank) +
                           " (in from its prev, out to its next) made the least progress" + steps + ".");
    }
    if (std::find(rf.stalled_ranks.begin(), rf.stalled_ranks.end(), *rf.rank) != rf.stalled_ranks.end()) {
      v.evidence.push_back("Rank " + std::to_string(*rf.rank) +
                           "'s ring progress records say its device stopped inside the collective (stalled), "
                           "while its neighbours wait on it.");
    }
    if (!job_.find(*rf.rank)) {
      v.evidence.push_back("Rank " + std::to_string(*rf.rank) +
                           " left no dump, so whether it is stuck inside the collective or elsewhere is unknown.");
    }
    std::string host = hostOf(job_, *rf.rank);
    v.next_steps.push_back("Check " + deviceText(job_, *rf.rank) + " (nvidia-smi, dmesg for Xid errors).");
    v.next_steps.push_back("Drain host " + (host.empty() ? std::string("of rank ") + std::to_string(*rf.rank) : host) +
                           " and restart the job from the last checkpoint.");
  } else {
    v.kind = VerdictKind::kInconclusive;
    if (!p.members_missing.empty()) {
      v.reason = "every rank that answered waits in the collective, and rank(s) " + ranksText(p.members_missing) +
                 " of the communicator left no snapshot: the culprit is most likely among them";
      v.next_steps.push_back("Look at rank(s) " + ranksText(p.members_missing) +
                             " directly (their logs, their hosts); they did not dump.");
    } else if (ranks_with_records == 0) {
      v.reason = "every rank waits in the same collective and no rank has ring progress records "
                 "(the collector's debugger phase did not run or failed), so the faulty link or rank cannot be told";
      v.next_steps.push_back("Look at ranks/rNNNNN.collect.log for why the debugger phase failed; run "
                             "forensics collect by hand on two neighbouring ranks while the job still hangs.");
    } else {
      v.reason = "every rank waits in the same collective and ring progress names no single link or rank (" + rf.note + ")";
      v.next_steps.push_back("Run nccl-tests on the hosts of this communicator to find the faulty link.");
    }
    v.headline = "Inconclusive: " + v.reason + ".";
  }
  return v;
}

void VerdictMaker::addCulpritStacks(Verdict& v) const {
  // A communication hang's culprit waits like everyone else: its stacks say nothing more.
  if (v.kind != VerdictKind::kNonCommunicationHang && v.kind != VerdictKind::kCollectiveMismatch) return;
  // Threads of the culprit whose stack no rank of the largest class has are where it differs.
  std::set<std::vector<std::string>> usual;
  if (!classes_.empty()) {
    for (const auto& st : classes_.front().thread_stacks) usual.insert(st);
  }
  for (int r : v.culprit_ranks) {
    const RankSummary* s = job_.find(r);
    if (!s || !s->has_forensics) continue;
    bool majority = !classes_.empty() && classes_.front().ranks.contains(r) && classes_.size() > 1;
    int shown = 0;
    for (const stackmerge::RankThread& t : s->threads) {
      std::span<const stackmerge::TableFrame> frames = job_.stacks->frames(t.stack);
      if (isInfrastructureThread(t.name) || frames.empty()) continue;
      bool main_thread = t.tid == s->pid;
      if (!main_thread && (majority || usual.count(job_.stacks->labels(t.stack)))) continue;
      v.where.push_back({r, t.name.empty() ? "tid " + std::to_string(t.tid) : t.name, whereFrames(frames)});
      if (++shown >= 3) break;
    }
  }
  std::set<int> said;
  for (const CulpritStack& c : v.where) {
    if (c.frames.empty() || !said.insert(c.rank).second) continue;
    std::string path;
    for (size_t i = 0; i < c.frames.size() && i < 4; ++i) path += (i ? " <- " : "") + c.frames[i];
    v.evidence.push_back("Rank " + std::to_string(c.rank) + " thread " + c.thread + " is in " + path + ".");
  }
}

void VerdictMaker::addDataNotes(Verdict& v) const {
  if (job_.trigger) {
    const TriggerRecord& t = *job_.trigger;
    std::string who = t.rank ? "rank " + std::to_string(*t.rank) : std::string("a manual trigger");
    std::string what = t.stuck_op ? ": " + t.stuck_op->op + (t.stuck_op->seq ? " seq " + std::to_string(*t.stuck_op->seq) : "") +
                                        " pending for " + seconds(t.stuck_op->age_s)
                                  : "";
    v.evidence.push_back("First detected by " + who + " on host " + t.host + " (" + t.reason + ")" + what + ".");
  }
  if (!job_.ranks_missing.empty()) {
    v.evidence.push_back("Rank(s) " + ranksText(job_.ranks_missing) + " left no usable dump; the verdict uses the other " +
                         std::to_string(job_.ranks.size()) + ".");
  }
}

}  // namespace hangwatch::verdict
