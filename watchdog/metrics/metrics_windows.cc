#include "hangwatch/watchdog/metrics/metrics_windows.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"

namespace hangwatch::watchdog {
namespace {

// Streams and sync call names are few in practice; the caps only guard memory.
constexpr size_t kMaxStreams = 64;
constexpr size_t kMaxSyncCalls = 16;

int64_t clockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

MetricsConfig withDefaults(MetricsConfig c) {
  if (c.pid == 0) c.pid = ::getpid();
  if (c.start_ns == 0) c.start_ns = clockNs(CLOCK_MONOTONIC);
  if (!(c.interval_s > 0)) c.interval_s = 10;
  c.interval_s = std::min(c.interval_s, 1e7);  // keeps the ns conversion in range
  if (!c.log_failure) {
    int rank = c.rank;
    c.log_failure = [rank](const std::string& m) { fmt::print(stderr, "hangwatch[rank {}]: {}\n", rank, m); };
  }
  return c;
}

}  // namespace

MetricsWindows::MetricsWindows(MetricsConfig config)
    : config_(withDefaults(std::move(config))),
      interval_ns_(static_cast<int64_t>(config_.interval_s * 1e9)),
      writer_(config_.path, config_.log_failure),
      window_start_ns_(config_.start_ns),
      keys_(config_.max_keys),
      timeline_(config_.start_ns),
      ring_(config_.timeline_path.empty() ? 1 : config_.timeline_ops,
            config_.timeline_path.empty() ? 1 : config_.timeline_syncs),
      prometheus_(config_.prometheus_path, config_.log_failure, config_.attempt) {}

void MetricsWindows::record(const CompletedOp& op) {
  if (op.gpu_start_ns <= 0 || op.gpu_end_ns < op.gpu_start_ns) {
    ++dropped_;
    return;
  }
  int64_t duration = op.gpu_end_ns - op.gpu_start_ns;
  keys_.add(op, duration);
  // GPU and host clocks are mapped onto each other, so a tiny negative latency is noise.
  if (op.host_issue_ns > 0) {
    issue_latency_[static_cast<size_t>(op.cls)].add(std::max<int64_t>(op.gpu_start_ns - op.host_issue_ns, 0));
  }
  timeline_.add(op.gpu_start_ns, op.gpu_end_ns);
  ring_.record(op);
  addStreamBusy(op);
  if (auto boundary = steps_.observe(op)) timeline_.addStepBoundary(*boundary);
}

void MetricsWindows::addStreamBusy(const CompletedOp& op) {
  auto it = streams_.find(op.stream);
  if (it == streams_.end()) {
    if (streams_.size() >= kMaxStreams) return;
    it = streams_.emplace(op.stream, StreamAggregate{}).first;
  }
  // One stream runs its ops one after another; the max() only absorbs clock noise.
  int64_t start = std::max({op.gpu_start_ns, it->second.last_end_ns, window_start_ns_});
  if (op.gpu_end_ns > start) it->second.busy_ns += op.gpu_end_ns - start;
  it->second.last_end_ns = std::max(it->second.last_end_ns, op.gpu_end_ns);
}

void MetricsWindows::recordHostSync(const HostSync& sync) {
  std::string_view call = sync.call ? sync.call : "";
  auto it = syncs_.find(call);
  if (it == syncs_.end()) {
    if (syncs_.size() >= kMaxSyncCalls) call = "other";
    it = syncs_.find(call);
    if (it == syncs_.end()) it = syncs_.emplace(std::string(call), SyncAggregate{}).first;
  }
  ++it->second.count;
  it->second.total_ns += std::max<int64_t>(sync.end_ns - sync.start_ns, 0);
  ring_.recordHostSync(sync);
}

void MetricsWindows::recordStepEnd(int64_t end_ns) { timeline_.addStepBoundary(steps_.markStep(end_ns)); }

void MetricsWindows::maybeFlush(int64_t now_ns) {
  if (now_ns - window_start_ns_ >= interval_ns_) flush(now_ns);
}

void MetricsWindows::flush(int64_t now_ns) {
  if (now_ns <= window_start_ns_) return;
  BusyTimeline::WindowTotals totals = timeline_.closeWindow(now_ns);
  try {
    last_ = build(now_ns, totals);
    if (config_.links != nullptr) last_.links = config_.links->drain();
    std::string line =
        toJson(last_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    if (config_.append_line) config_.append_line(config_.path, std::move(line));
    else writer_.append(line);
    prometheus_.write(last_);
  } catch (const std::exception& e) {
    // Out of memory while formatting: lose this window, never the job.
    config_.log_failure(std::string("metrics window lost: ") + e.what());
  }
  writeTimeline(now_ns);
  resetWindow(now_ns);
}

void MetricsWindows::writeTimeline(int64_t now_ns) {
  if (config_.timeline_path.empty() || timeline_failed_) return;
  try {
    TimelineWindow w = ring_.snapshot();
    w.rank = config_.rank;
    w.host = config_.host;
    w.pid = config_.pid;
    if (config_.device >= 0) w.device = config_.device;
    w.clock_mono_ns = clockNs(CLOCK_MONOTONIC);
    w.clock_unix_s = static_cast<double>(clockNs(CLOCK_REALTIME)) * 1e-9;
    std::string text = toJson(w).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (config_.replace_file) {
      config_.replace_file(config_.timeline_path, std::move(text));
      return;
    }
    auto written = writeFileAtomically(config_.timeline_path, text);
    if (!written) {
      timeline_failed_ = true;
      config_.log_failure("timeline not written (no more tries): " + written.error());
    }
  } catch (const std::exception& e) {
    config_.log_failure(std::string("timeline lost: ") + e.what());
  }
}

MetricsWindow MetricsWindows::build(int64_t now_ns, const BusyTimeline::WindowTotals& totals) const {
  MetricsWindow w;
  w.rank = config_.rank;
  w.host = config_.host;
  w.pid = config_.pid;
  if (config_.device >= 0) w.device = config_.device;
  w.start_mono_ns = window_start_ns_;
  w.end_mono_ns = now_ns;
  // Wall clock of `now_ns`: monotonic and realtime read together give the offset.
  int64_t wall_minus_mono = clockNs(CLOCK_REALTIME) - clockNs(CLOCK_MONOTONIC);
  w.end_unix_s = static_cast<double>(now_ns + wall_minus_mono) * 1e-9;
  w.start_unix_s = static_cast<double>(window_start_ns_ + wall_minus_mono) * 1e-9;
  w.ops = keys_.stats();
  w.other_count = keys_.otherCount();
  w.other_ns = keys_.otherNs();
  for (size_t c = 0; c < std::size(issue_latency_); ++c) {
    if (!issue_latency_[c].empty()) w.issue_latency[opClassName(static_cast<OpClass>(c))] = issue_latency_[c];
  }
  w.busy_ns = totals.busy_ns;
  w.void_ns = totals.void_ns;
  w.inter_step_void_ns = totals.inter_step_void_ns;
  for (const auto& [stream, s] : streams_) {
    if (s.busy_ns > 0) w.streams.push_back({hexId(stream), s.busy_ns});
  }
  for (const auto& [call, s] : syncs_) {
    w.sync_count += s.count;
    w.sync_ns += s.total_ns;
    w.syncs.push_back({call, s.count, s.total_ns});
  }
  w.step = steps_.windowStats();
  w.dropped = dropped_;
  return w;
}

void MetricsWindows::resetWindow(int64_t start_ns) {
  window_start_ns_ = start_ns;
  keys_.clear();
  for (LogHistogram& h : issue_latency_) h.clear();
  // Streams stay known (their last end keeps ops from being counted twice); only the sums reset.
  for (auto& [stream, s] : streams_) s.busy_ns = 0;
  syncs_.clear();
  steps_.clearWindow();
  dropped_ = 0;
}

}  // namespace hangwatch::watchdog
