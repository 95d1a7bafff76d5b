// What `forensics analyze` costs on a pipeline job's timelines with the critical-path pass
// (analyzer/slowdown/critical_path.h) and without it: JobProfile::load + SlowdownAnalyzer::analyze
// over a synthetic 64-rank job (TP 4 x DP 4 x PP 4 in Megatron's rank order, 1F1B with 8
// micro-batches, every rank's ring full at 4096 ops), written once into a temporary job dir with
// the watchdog's own writers. BM_AnalyzeWithCriticalPath's `x_op_by_op` counter is the ratio of
// the two, measured in the same run: report that.
//   ninja -C build analyze_bench && build/bench/analyze_bench
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/common/nccl_bandwidth.h"
#include "hangwatch/common/timeline_window.h"
#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/slowdown/slowdown_analyzer.h"
#include "pipeline_schedule.h"

namespace {

using hangwatch::LogHistogram;
using hangwatch::MetricsWindow;
using hangwatch::OpWindowStats;
using hangwatch::TimelineOp;
using hangwatch::TimelineSync;
using hangwatch::TimelineWindow;

constexpr int kTp = 4;
constexpr int kDp = 4;
constexpr int kStages = 4;
constexpr int kRanks = kTp * kDp * kStages;
constexpr int kRanksPerHost = 8;
constexpr int kMicrobatches = 8;
// The first stage launches 81 ops a step, the middle ones 97: 54 steps wrap every rank's ring.
constexpr int kSteps = 54;
constexpr size_t kRingOps = 4096;
constexpr int kWindows = 4;
constexpr int kIterations = 5;

constexpr int64_t kUs = 1000;
constexpr int64_t kGemmNs = 100 * kUs;
constexpr int64_t kTpAllReduceNs = 300 * kUs;
constexpr int64_t kP2pNs = 200 * kUs;
constexpr int64_t kDpAllReduceNs = 400 * kUs;
constexpr int64_t kLaunchGapNs = 3 * kUs;                  // between kernels on one stream
constexpr int64_t kIssueGapNs = 8 * kUs;                   // host time per launch
constexpr int64_t kSyncReturnNs = 10 * kUs;                // cudaStreamSynchronize returning after the GPU is done
constexpr int64_t kHostStepNs = 300 * kUs;                 // optimizer and next batch before the first launch
constexpr uint64_t kActivationBytes = 2048ull * 4096 * 2;  // one micro-batch's hidden states, bf16
constexpr uint64_t kAnchorBytes = 1048576;                 // the step anchor: DP all-reduce
constexpr int64_t kMonoStartNs = 44'000'000'000'000;       // every rank's clock: one pair in every file
constexpr double kUnixAtStart = 1'795'940'000.0;
const char* const kStream = "0x5100010";

// A GPU at a third of its speed for four steps: an analyzed job is a slow one. The critical-path
// pass names it; the op-by-op detectors see it diluted in its windows and report nothing.
constexpr int kSlowRank = 37;  // tp 1, dp 1, stage 2
constexpr int kSlowFirstStep = 44;
constexpr int kSlowLastStep = 47;
constexpr double kSlowFactor = 3.0;

struct Gemm {
  const char* shape;
  double flops;
};
constexpr Gemm kGemmA = {"2048x3072x4096", 2.0 * 2048 * 3072 * 4096};
constexpr Gemm kGemmB = {"2048x4096x3072", 2.0 * 2048 * 4096 * 3072};

int tpOf(int rank) { return rank % kTp; }
int dpOf(int rank) { return rank / kTp % kDp; }
int stageOf(int rank) { return rank / (kTp * kDp); }
int rankAt(int tp, int dp, int stage) { return tp + kTp * (dp + kDp * stage); }
std::string hostOf(int rank) { return fmt::format("node{:02}", rank / kRanksPerHost); }

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

enum CommKind { kTpComm, kDpComm, kPpComm };
std::string commHash(CommKind kind, int group) {
  return fmt::format("{:#x}", mix(static_cast<uint64_t>(kind) * 1000 + group) | (1ull << 63));
}
std::string tpComm(int rank) { return commHash(kTpComm, dpOf(rank) + kDp * stageOf(rank)); }
std::string dpComm(int rank) { return commHash(kDpComm, tpOf(rank) + kTp * stageOf(rank)); }
std::string ppComm(int rank) { return commHash(kPpComm, tpOf(rank) + kTp * dpOf(rank)); }

// Who a communication launch waits for: (TP or DP group, seq) for a collective; (sender,
// receiver, n) for the n-th transfer between two ranks, matched in order as NCCL does.
using MeetKey = std::tuple<int, int, int, uint64_t>;
struct Meeting {
  int expected = 0;
  int arrived = 0;
  int64_t last_start_ns = 0;
};
using Meetings = std::map<MeetKey, Meeting>;

// One launch on the rank's stream: a GEMM, a collective, or a group of sends and receives
// (its ops share one start and end, as one ncclGroupEnd runs them).
struct Launch {
  std::vector<TimelineOp> ops;
  std::vector<MeetKey> meets;
  int64_t duration_ns = 0;
  int step = 0;
  int index_in_step = 0;
  bool closes_step = false;
  bool started = false;
  int64_t issue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct RankRun {
  int rank = -1;
  std::vector<Launch> launches;
  size_t next = 0;  // the first launch not yet ended
  int64_t stream_free_ns = kMonoStartNs;
  int64_t step_base_ns = kMonoStartNs;  // when the host issues the step's first launch
  std::vector<TimelineSync> syncs;
};

// One rank's launches, in the order its host issues them.
class Planner {
 public:
  Planner(int rank, Meetings& meetings) : meetings_(meetings) { run_.rank = rank; }

  RankRun plan() {
    const int rank = run_.rank;
    for (step_ = 0; step_ < kSteps; ++step_) {
      index_ = 0;
      for (const PipeStep& s : oneFOneB(stageOf(rank), kStages, kMicrobatches)) {
        if (s.action == PipeAction::Transfer) {
          transfer(s);
          continue;
        }
        const bool forward = s.action == PipeAction::Forward;
        for (int g = 0; g < (forward ? 2 : 4); ++g) gemm(g % 2 ? kGemmB : kGemmA);
        allReduce(kTpComm, tp_seq_++);
      }
      allReduce(kDpComm, dp_seq_++);
      run_.launches.back().closes_step = true;
    }
    return std::move(run_);
  }

 private:
  Launch& add(int64_t duration_ns) {
    Launch& l = run_.launches.emplace_back();
    l.duration_ns = duration_ns;
    l.step = step_;
    l.index_in_step = index_++;
    return l;
  }

  void meet(Launch& l, const MeetKey& key) {
    l.meets.push_back(key);
    ++meetings_[key].expected;
  }

  // 100 us +-5%, from a hash of where it runs, so every run writes the same job.
  int64_t gemmNs() const {
    const uint64_t h = mix((static_cast<uint64_t>(run_.rank) << 40) ^ (static_cast<uint64_t>(step_) << 20) ^ index_);
    double ns = static_cast<double>(kGemmNs) * (0.95 + 0.1 * static_cast<double>(h % 1000) / 1000.0);
    if (run_.rank == kSlowRank && step_ >= kSlowFirstStep && step_ <= kSlowLastStep) ns *= kSlowFactor;
    return static_cast<int64_t>(ns);
  }

  void gemm(const Gemm& g) {
    Launch& l = add(gemmNs());
    TimelineOp& o = l.ops.emplace_back();
    o.cls = "gemm";
    o.name = "cublasGemmEx";
    o.stream = kStream;
    o.shape = g.shape;
    o.flops = g.flops;
  }

  // The TP all-reduce after a forward or backward, or the DP one that ends the step.
  void allReduce(CommKind kind, uint64_t seq) {
    const int rank = run_.rank, stage = stageOf(rank);
    const bool tp = kind == kTpComm;
    Launch& l = add(tp ? kTpAllReduceNs : kDpAllReduceNs);
    meet(l, {kind, tp ? dpOf(rank) + kDp * stage : tpOf(rank) + kTp * stage, 0, seq});
    TimelineOp& o = l.ops.emplace_back();
    o.cls = "coll";
    o.name = "ncclAllReduce";
    o.stream = kStream;
    o.comm = tp ? tpComm(rank) : dpComm(rank);
    o.comm_rank = tp ? tpOf(rank) : dpOf(rank);
    o.comm_size = tp ? kTp : kDp;
    o.seq = seq;
    o.bytes = tp ? kActivationBytes : kAnchorBytes;
  }

  void transfer(const PipeStep& s) {
    Launch& l = add(kP2pNs);
    const int rank = run_.rank, stage = stageOf(rank);
    for (const PipeTransferPart& p : s.parts) {
      const int peer_stage = stage + (p.send == p.forward ? 1 : -1);  // sends go forward, receives come back
      const int peer = rankAt(tpOf(rank), dpOf(rank), peer_stage);
      const int from = p.send ? rank : peer, to = p.send ? peer : rank;
      meet(l, {kPpComm, from, to, transfers_[{from, to}]++});
      TimelineOp& o = l.ops.emplace_back();
      o.cls = "p2p";
      o.name = p.send ? "ncclSend" : "ncclRecv";
      o.stream = kStream;
      o.comm = ppComm(rank);
      o.comm_rank = stage;
      o.comm_size = kStages;
      o.peer = peer_stage;
      o.bytes = kActivationBytes;
    }
  }

  Meetings& meetings_;
  RankRun run_;
  int step_ = 0;
  int index_ = 0;
  uint64_t tp_seq_ = 0;
  uint64_t dp_seq_ = 0;
  std::map<std::pair<int, int>, uint64_t> transfers_;  // (sender, receiver) -> transfers so far
};

void startLaunch(RankRun& r, Launch& l, Meetings& meetings) {
  l.started = true;
  l.issue_ns = r.step_base_ns + l.index_in_step * kIssueGapNs;
  l.start_ns = std::max(r.stream_free_ns, l.issue_ns) + kLaunchGapNs;
  for (const MeetKey& k : l.meets) {
    Meeting& m = meetings.at(k);
    ++m.arrived;
    m.last_start_ns = std::max(m.last_start_ns, l.start_ns);
  }
}

// The host waits for the step's last op, then prepares the next step.
void closeStep(RankRun& r, const Launch& l) {
  const int64_t sync_start = l.issue_ns + kIssueGapNs;
  const int64_t sync_end = std::max(sync_start, l.end_ns) + kSyncReturnNs;
  r.syncs.push_back({"cudaStreamSynchronize", sync_start, sync_end});
  r.step_base_ns = sync_end + kHostStepNs;
}

// Runs the rank's stream as far as its peers allow; whether anything moved.
bool advance(RankRun& r, Meetings& meetings) {
  bool moved = false;
  while (r.next < r.launches.size()) {
    Launch& l = r.launches[r.next];
    if (!l.started) {
      startLaunch(r, l, meetings);
      moved = true;
    }
    // A communication op ends its duration after its last member started.
    int64_t last_start = l.start_ns;
    for (const MeetKey& k : l.meets) {
      const Meeting& m = meetings.at(k);
      if (m.arrived < m.expected) return moved;
      last_start = std::max(last_start, m.last_start_ns);
    }
    l.end_ns = last_start + l.duration_ns;
    r.stream_free_ns = l.end_ns;
    if (l.closes_step) closeStep(r, l);
    ++r.next;
    moved = true;
  }
  return moved;
}

std::vector<RankRun> simulateJob() {
  Meetings meetings;
  std::vector<RankRun> runs;
  for (int rank = 0; rank < kRanks; ++rank) runs.push_back(Planner(rank, meetings).plan());
  for (bool moved = true; moved;) {
    moved = false;
    for (RankRun& r : runs) moved |= advance(r, meetings);
  }
  for (const RankRun& r : runs)
    if (r.next != r.launches.size())
      throw std::logic_error(fmt::format("the schedule deadlocks: rank {} at launch {}", r.rank, r.next));
  return runs;
}

// The rank's ops with their times, oldest first.
std::vector<TimelineOp> opsOf(const RankRun& r) {
  std::vector<TimelineOp> ops;
  for (const Launch& l : r.launches) {
    for (TimelineOp o : l.ops) {
      o.issue_ns = l.issue_ns;
      o.start_ns = l.start_ns;
      o.end_ns = l.end_ns;
      ops.push_back(std::move(o));
    }
  }
  return ops;
}

double unixAt(int64_t mono_ns) { return kUnixAtStart + static_cast<double>(mono_ns - kMonoStartNs) / 1e9; }

// What the watchdog's ring held when it last wrote the file: the newest kRingOps ops.
TimelineWindow timelineOf(const RankRun& r, const std::vector<TimelineOp>& ops, int64_t written_ns) {
  TimelineWindow t;
  t.rank = r.rank;
  t.host = hostOf(r.rank);
  t.pid = 20000 + r.rank;
  t.device = r.rank % kRanksPerHost;
  t.clock_mono_ns = written_ns;
  t.clock_unix_s = unixAt(written_ns);
  const size_t first = ops.size() > kRingOps ? ops.size() - kRingOps : 0;
  t.overwritten = first;
  t.ops.assign(ops.begin() + static_cast<std::ptrdiff_t>(first), ops.end());
  for (const TimelineSync& s : r.syncs)
    if (s.end_ns >= t.ops.front().issue_ns) t.syncs.push_back(s);
  return t;
}

struct OpTotals {
  OpWindowStats stats;
  double flops = 0;
};

// As the watchdog's OpKeyTable folds them: per key, durations and rates.
void addOp(std::map<std::string, OpTotals>& by_key, const TimelineOp& o) {
  const std::string key = fmt::format("{} {} {} {} {} {}", o.cls, o.name, o.shape, o.comm, o.peer, o.bytes);
  OpTotals& t = by_key[key];
  OpWindowStats& s = t.stats;
  if (s.count == 0) {
    s.cls = o.cls;
    s.name = o.name;
    s.shape = o.shape;
    s.comm = o.comm;
    if (!o.comm.empty()) {
      s.comm_size = o.comm_size;
      s.comm_rank = o.comm_rank;
    }
    if (o.cls == "p2p") s.peer = o.peer;
    s.bytes = o.bytes;
  }
  const int64_t ns = o.end_ns - o.start_ns;
  ++s.count;
  s.total_ns += ns;
  s.max_ns = std::max(s.max_ns, ns);
  s.durations.add(ns);
  t.flops += o.flops;
}

OpWindowStats finish(OpTotals& t) {
  OpWindowStats& s = t.stats;
  s.p50_ns = s.durations.percentileNs(0.50);
  s.p99_ns = s.durations.percentileNs(0.99);
  const double mean_ns = static_cast<double>(s.total_ns) / static_cast<double>(s.count);
  if (s.cls == "gemm") s.tflops = t.flops / static_cast<double>(s.total_ns) / 1e3;
  if (s.cls == "coll" || s.cls == "p2p") {
    const double algbw =
        hangwatch::gigabytesPerSecond(hangwatch::ncclTestsSizeBytes(s.name, s.bytes, s.comm_size), mean_ns);
    s.algbw_gbps = algbw;
    if (auto factor = hangwatch::busBandwidthFactor(s.name, s.comm_size)) s.busbw_gbps = algbw * *factor;
  }
  return s;
}

// Busy time (the union of the ops' intervals, clipped to the window) and the steps that ended
// in it: periods between the anchor's completions, each with its longest idle gap.
void addBusyAndSteps(MetricsWindow& w, const std::vector<TimelineOp>& ops, const std::string& anchor_comm) {
  int64_t covered = w.start_mono_ns, prev_anchor_end = 0, longest_gap = 0, steps_gap = 0;
  std::vector<int64_t> steps;
  for (const TimelineOp& o : ops) {
    if (o.start_ns > covered && o.start_ns < w.end_mono_ns) longest_gap = std::max(longest_gap, o.start_ns - covered);
    const int64_t from = std::clamp(std::max(o.start_ns, covered), w.start_mono_ns, w.end_mono_ns);
    const int64_t to = std::clamp(o.end_ns, w.start_mono_ns, w.end_mono_ns);
    if (to > from) w.busy_ns += to - from;
    covered = std::max(covered, o.end_ns);
    if (o.cls != "coll" || o.comm != anchor_comm || o.bytes != kAnchorBytes) continue;
    if (prev_anchor_end > 0 && o.end_ns >= w.start_mono_ns && o.end_ns < w.end_mono_ns) {
      steps.push_back(o.end_ns - prev_anchor_end);
      steps_gap += longest_gap;
    }
    prev_anchor_end = o.end_ns;
    longest_gap = 0;
  }
  w.void_ns = w.end_mono_ns - w.start_mono_ns - w.busy_ns;
  w.streams.push_back({kStream, w.busy_ns});
  if (steps.empty()) return;
  hangwatch::StepStats s{"anchor", fmt::format("ncclAllReduce {} {}", anchor_comm, kAnchorBytes)};
  LogHistogram h;
  for (int64_t ns : steps) {
    ++s.count;
    s.total_ns += ns;
    s.max_ns = std::max(s.max_ns, ns);
    h.add(ns);
  }
  s.p50_ns = h.percentileNs(0.5);
  w.step = s;
  w.inter_step_void_ns = steps_gap;
}

MetricsWindow metricsWindowOf(const RankRun& r, const std::vector<TimelineOp>& ops, int64_t m0, int64_t m1) {
  MetricsWindow w;
  w.rank = r.rank;
  w.host = hostOf(r.rank);
  w.pid = 20000 + r.rank;
  w.device = r.rank % kRanksPerHost;
  w.start_mono_ns = m0;
  w.end_mono_ns = m1;
  w.start_unix_s = unixAt(m0);
  w.end_unix_s = unixAt(m1);
  std::map<std::string, OpTotals> by_key;
  for (const TimelineOp& o : ops) {
    if (o.end_ns < m0 || o.end_ns >= m1) continue;
    addOp(by_key, o);
    w.issue_latency[o.cls].add(std::max<int64_t>(o.start_ns - o.issue_ns, 0));
  }
  for (auto& [key, t] : by_key) w.ops.push_back(finish(t));
  addBusyAndSteps(w, ops, dpComm(r.rank));
  std::map<std::string, hangwatch::HostSyncStats> syncs;
  for (const TimelineSync& s : r.syncs) {
    if (s.end_ns < m0 || s.end_ns >= m1) continue;
    hangwatch::HostSyncStats& c = syncs[s.call];
    c.call = s.call;
    ++c.count;
    c.total_ns += s.end_ns - s.start_ns;
    ++w.sync_count;
    w.sync_ns += s.end_ns - s.start_ns;
  }
  for (auto& [call, c] : syncs) w.syncs.push_back(c);
  return w;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

void writeJob(const std::string& dir) {
  const std::vector<RankRun> runs = simulateJob();
  int64_t job_end = kMonoStartNs;
  for (const RankRun& r : runs) job_end = std::max(job_end, r.syncs.back().end_ns);
  const int64_t written_ns = job_end + 1000 * kUs;
  std::filesystem::create_directories(hangwatch::metricsDir(dir));
  std::filesystem::create_directories(hangwatch::timelineDir(dir));
  const int64_t window_ns = (written_ns - kMonoStartNs) / kWindows;
  for (const RankRun& r : runs) {
    const std::vector<TimelineOp> ops = opsOf(r);
    std::string lines;
    for (int i = 0; i < kWindows; ++i) {
      const int64_t m0 = kMonoStartNs + i * window_ns;
      lines += toJson(metricsWindowOf(r, ops, m0, i + 1 == kWindows ? written_ns : m0 + window_ns)).dump() + "\n";
    }
    writeFile(hangwatch::metricsPath(dir, r.rank), lines);
    writeFile(hangwatch::timelinePath(dir, r.rank), toJson(timelineOf(r, ops, written_ns)).dump());
  }
}

// The job dir, written on first use and removed at exit.
class SyntheticJob {
 public:
  SyntheticJob() {
    char tmpl[] = "/tmp/hangwatch-analyze-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    writeJob(dir_);
  }
  ~SyntheticJob() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SyntheticJob(const SyntheticJob&) = delete;
  SyntheticJob& operator=(const SyntheticJob&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

const std::string& jobDir() {
  static const SyntheticJob job;
  return job.dir();
}

using hangwatch::slowdown::JobProfile;
using hangwatch::slowdown::SlowdownAnalysis;
using hangwatch::slowdown::SlowdownAnalyzer;
using hangwatch::slowdown::SlowdownThresholds;

// BM_AnalyzeOpByOp's wall time over all its repetitions, for the ratio.
double g_op_by_op_ms = 0;
int g_op_by_op_runs = 0;

// Load and analyze, as `forensics analyze` does; the mean wall time of one, in ms.
double analyzeJob(benchmark::State& state, bool critical_path) {
  const std::string& dir = jobDir();
  SlowdownThresholds t;
  t.critical_path = critical_path;
  const SlowdownAnalyzer analyzer(t);
  size_t findings = 0, path_steps = 0, causes = 0;
  std::chrono::steady_clock::duration spent{};
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    hangwatch::Expected<JobProfile> job = JobProfile::load(dir);
    if (!job || job->ranks().size() != static_cast<size_t>(kRanks)) {
      state.SkipWithError(job ? "not every rank loaded" : job.error().c_str());
      return 0;
    }
    const SlowdownAnalysis a = analyzer.analyze(*job);
    spent += std::chrono::steady_clock::now() - t0;
    findings = a.findings.size();
    path_steps = a.critical_path ? a.critical_path->steps.size() : 0;
    causes = a.critical_path ? a.critical_path->causes.size() : 0;
    benchmark::DoNotOptimize(a.findings.data());
  }
  state.counters["findings"] = static_cast<double>(findings);
  state.counters["path_steps"] = static_cast<double>(path_steps);
  state.counters["causes"] = static_cast<double>(causes);
  return std::chrono::duration<double, std::milli>(spent).count() / static_cast<double>(state.iterations());
}

void BM_AnalyzeOpByOp(benchmark::State& state) {
  if (const double ms = analyzeJob(state, false); ms > 0) {
    g_op_by_op_ms += ms;
    ++g_op_by_op_runs;
  }
}

void BM_AnalyzeWithCriticalPath(benchmark::State& state) {
  const double ms = analyzeJob(state, true);
  if (g_op_by_op_ms > 0 && ms > 0) state.counters["x_op_by_op"] = ms / (g_op_by_op_ms / g_op_by_op_runs);
}

BENCHMARK(BM_AnalyzeOpByOp)->Unit(benchmark::kMillisecond)->Iterations(kIterations);
BENCHMARK(BM_AnalyzeWithCriticalPath)->Unit(benchmark::kMillisecond)->Iterations(kIterations);

}  // namespace

BENCHMARK_MAIN();
