#include "hangwatch/watchdog/metrics/prometheus_textfile.h"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/log_histogram.h"

namespace hangwatch::watchdog {
// Not in the anonymous namespace: PrometheusTextfile::OpGroups, declared in the header, holds them.
namespace prometheus_series {

// A rate over several keys, weighted by their GPU time: total work / total time.
struct TimeWeighted {
  double value_ns = 0;
  int64_t ns = 0;
  void add(const std::optional<double>& v, int64_t t) {
    if (!v) return;
    value_ns += *v * static_cast<double>(t);
    ns += t;
  }
  double mean() const { return value_ns / static_cast<double>(ns); }
};

// One (communicator, collective) or one GEMM shape: the window's keys of it merged.
struct SeriesGroup {
  std::string comm;
  std::string name;  // collective name or GEMM shape
  int64_t total_ns = 0;
  TimeWeighted busbw, algbw, tflops;
  LogHistogram durations;
};

}  // namespace prometheus_series
using prometheus_series::SeriesGroup;
using prometheus_series::TimeWeighted;

namespace {

constexpr double kNsPerSecond = 1e9;

void addTo(SeriesGroup& g, const OpWindowStats& op) {
  g.total_ns += op.total_ns;
  g.durations.merge(op.durations);
  g.busbw.add(op.busbw_gbps, op.total_ns);
  g.algbw.add(op.algbw_gbps, op.total_ns);
  g.tflops.add(op.tflops, op.total_ns);
}

// Busiest first; ties keep the label order, so the same window gives the same file.
std::vector<SeriesGroup> busiestFirst(std::map<std::pair<std::string, std::string>, SeriesGroup>& groups) {
  std::vector<SeriesGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(),
                   [](const SeriesGroup& a, const SeriesGroup& b) { return a.total_ns > b.total_ns; });
  return out;
}

// A window's collectives per (communicator, collective) and GEMMs per shape.
std::pair<std::vector<SeriesGroup>, std::vector<SeriesGroup>> groupOps(const MetricsWindow& w) {
  std::map<std::pair<std::string, std::string>, SeriesGroup> colls, gemms;
  for (const OpWindowStats& op : w.ops) {
    if (op.cls == "coll") {
      SeriesGroup& g = colls[{op.comm, op.name}];
      g.comm = op.comm;
      g.name = op.name;
      addTo(g, op);
    } else if (op.cls == "gemm" && !op.shape.empty()) {
      SeriesGroup& g = gemms[{"", op.shape}];
      g.name = op.shape;
      addTo(g, op);
    }
  }
  return {busiestFirst(colls), busiestFirst(gemms)};
}

class Exposition {
 public:
  explicit Exposition(std::string base_labels) : base_(std::move(base_labels)) {}

  // HELP and TYPE once per family, right before its first sample.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, std::string_view labels, double value, std::string_view format = "{:.4g}") {
    fmt::format_to(std::back_inserter(out_), "{}{{{}{}{}}} ", name, base_, labels.empty() ? "" : ",", labels);
    fmt::format_to(std::back_inserter(out_), fmt::runtime(format), value);
    out_.push_back('\n');
  }
  std::string take() { return fmt::to_string(out_); }

 private:
  std::string base_;
  fmt::memory_buffer out_;
};

std::string opLabels(const SeriesGroup& g, bool gemm) {
  if (gemm) return fmt::format("shape=\"{}\"", escapePrometheusLabelValue(g.name));
  return fmt::format("comm=\"{}\",collective=\"{}\"", escapePrometheusLabelValue(g.comm),
                     escapePrometheusLabelValue(g.name));
}

// Window percentiles as gauges: a summary's `quantile` would promise a cumulative _sum and
// _count, which node_exporter fills with zeros when they are missing.
void percentiles(Exposition& e, std::string_view family, const std::string& labels, const LogHistogram& h) {
  e.sample(family, labels + (labels.empty() ? "" : ",") + "percentile=\"50\"", h.percentileNs(0.5) / kNsPerSecond);
  e.sample(family, labels + (labels.empty() ? "" : ",") + "percentile=\"99\"", h.percentileNs(0.99) / kNsPerSecond);
}

}  // namespace

struct PrometheusTextfile::OpGroups {
  std::vector<SeriesGroup> collectives;
  std::vector<SeriesGroup> gemms;
};

std::string escapePrometheusLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusTextfile::pathFor(const std::string& dir, int rank) {
  return dir + "/hangwatch_" + rankTag(rank) + ".prom";
}

PrometheusTextfile::PrometheusTextfile(std::string path, FailureLog log, std::string attempt)
    : attempt_(std::move(attempt)), path_(std::move(path)), log_(std::move(log)) {}

PrometheusTextfile::~PrometheusTextfile() {
  if (written_ && !hang_) ::unlink(path_.c_str());
}

void PrometheusTextfile::accumulate(const MetricsWindow& w) {
  if (w.step) steps_total_ += w.step->count;
  for (const LinkWindowStats& l : w.links) {
    LinkKey key{l.comm, l.peer};
    auto it = link_wire_ns_.find(key);
    if (it == link_wire_ns_.end()) {
      if (link_wire_ns_.size() >= kMaxLinks) continue;
      it = link_wire_ns_.emplace(key, 0).first;
    }
    it->second += l.busy_ns;
  }
}

std::string PrometheusTextfile::text(const MetricsWindow& w) const {
  auto [collectives, gemms] = groupOps(w);
  OpGroups groups{std::move(collectives), std::move(gemms)};
  Caps caps{std::min(kMaxCollectives, groups.collectives.size()), std::min(kMaxGemmShapes, groups.gemms.size()),
            std::min(kMaxLinks, link_wire_ns_.size())};
  std::string out = render(w, groups, caps);
  // Over budget (long host names, many busy keys): one series group fewer at a time,
  // from whichever kind has the most.
  while (out.size() > kBudgetBytes && caps.collectives + caps.gemm_shapes + caps.links > 0) {
    size_t* largest = &caps.links;
    for (size_t* cap : {&caps.collectives, &caps.gemm_shapes})
      if (*cap > *largest) largest = cap;
    --*largest;
    out = render(w, groups, caps);
  }
  return out;
}

std::string PrometheusTextfile::render(const MetricsWindow& w, const OpGroups& groups, const Caps& caps) const {
  std::string base = fmt::format("rank=\"{}\",host=\"{}\"", w.rank, escapePrometheusLabelValue(w.host));
  if (!attempt_.empty()) base += fmt::format(",attempt=\"{}\"", escapePrometheusLabelValue(attempt_));
  Exposition e(std::move(base));

  e.family("hangwatch_hang", "gauge", "1 after the hang trigger fired.");
  e.sample("hangwatch_hang", "", hang_ ? 1 : 0);
  e.family("hangwatch_suspected", "gauge", "1 from an early warning until this rank's GPU work moved again.");
  e.sample("hangwatch_suspected", "", suspected_ ? 1 : 0);
  e.family("hangwatch_dump_fallback", "gauge",
           "1 once the dump folder failed or stalled and this rank's dumps go to the node-local folder named.");
  e.sample("hangwatch_dump_fallback",
           dump_fallback_.empty() ? "" : fmt::format("dir=\"{}\"", escapePrometheusLabelValue(dump_fallback_)),
           dump_fallback_.empty() ? 0 : 1);
  e.family("hangwatch_steps_total", "counter", "Steps completed.");
  e.sample("hangwatch_steps_total", "", static_cast<double>(steps_total_), "{:.0f}");
  if (int64_t length = w.end_mono_ns - w.start_mono_ns; length > 0) {
    e.family("hangwatch_void_ratio", "gauge", "GPU idle share of the window.");
    e.sample("hangwatch_void_ratio", "", static_cast<double>(w.void_ns) / static_cast<double>(length));
  }
  if (LogHistogram il = issueLatencyAllClasses(w); !il.empty()) {
    e.family("hangwatch_issue_latency_seconds", "gauge", "Kernel issue latency.");
    percentiles(e, "hangwatch_issue_latency_seconds", "", il);
  }

  std::span<const SeriesGroup> colls(groups.collectives.data(), caps.collectives);
  std::span<const SeriesGroup> gemms(groups.gemms.data(), caps.gemm_shapes);
  // Each family only with samples: a family of HELP and TYPE alone would cost bytes for nothing.
  auto ratedFamily = [&](std::span<const SeriesGroup> gs, TimeWeighted SeriesGroup::*rate, std::string_view name,
                         std::string_view help, bool gemm) {
    if (std::none_of(gs.begin(), gs.end(), [&](const SeriesGroup& g) { return (g.*rate).ns > 0; })) return;
    e.family(name, "gauge", help);
    for (const SeriesGroup& g : gs)
      if ((g.*rate).ns > 0) e.sample(name, opLabels(g, gemm), (g.*rate).mean());
  };
  ratedFamily(colls, &SeriesGroup::busbw, "hangwatch_busbw_gbps", "Bus bandwidth, GB/s.", false);
  ratedFamily(colls, &SeriesGroup::algbw, "hangwatch_algbw_gbps", "Algorithm bandwidth, GB/s.", false);
  if (!colls.empty()) {
    e.family("hangwatch_collective_seconds", "gauge", "Collective duration.");
    for (const SeriesGroup& g : colls)
      if (!g.durations.empty()) percentiles(e, "hangwatch_collective_seconds", opLabels(g, false), g.durations);
  }
  ratedFamily(gemms, &SeriesGroup::tflops, "hangwatch_gemm_tflops", "GEMM TFLOPS.", true);
  if (caps.links > 0) {
    e.family("hangwatch_link_wire_seconds_total", "counter", "Send time on the wire.");
    size_t n = 0;
    for (const auto& [key, ns] : link_wire_ns_) {
      if (n++ == caps.links) break;
      e.sample("hangwatch_link_wire_seconds_total",
               fmt::format("comm=\"{}\",peer=\"{}\"", escapePrometheusLabelValue(key.comm), key.peer),
               static_cast<double>(ns) / kNsPerSecond, "{:.9g}");
    }
  }
  return e.take();
}

void PrometheusTextfile::write(const MetricsWindow& w) {
  if (path_.empty()) return;
  accumulate(w);
  rewrite(w);
}

void PrometheusTextfile::markSuspected(bool suspected, const MetricsWindow& last) {
  suspected_ = suspected;
  if (written_) rewrite(last);
}

void PrometheusTextfile::markDumpFallback(const std::string& fallback_dir, const MetricsWindow& last) {
  dump_fallback_ = fallback_dir;
  if (written_) rewrite(last);
}

void PrometheusTextfile::rewrite(const MetricsWindow& w) {
  if (path_.empty()) return;
  // node_exporter reads it as a user of its own: world-readable, unlike the dumps.
  auto written = writeFileAtomically(path_, text(w), 0644);
  if (written) {
    written_ = true;
    return;
  }
  if (!failure_logged_ && log_) log_("prometheus textfile not written (tried again every window): " + written.error());
  failure_logged_ = true;
}

}  // namespace hangwatch::watchdog
