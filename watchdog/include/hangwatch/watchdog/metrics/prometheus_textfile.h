#pragma once
// The rank's node_exporter textfile (DESIGN.md §4, HANGWATCH_PROMETHEUS_DIR): at every
// metrics window <dir>/hangwatch_rNNNNN.prom is rewritten atomically (temp name, then
// rename; node_exporter reads only *.prom), so dashboards and alert rules see the rank
// while it trains. Series and labels: watchdog/README.md.
//
// Threading: the poller thread only, at window time; nothing here is on the launch path.
// A failed write is logged once and tried again at the next window: the job goes on.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "hangwatch/common/metrics_window.h"

namespace hangwatch::watchdog {

class PrometheusTextfile {
 public:
  using FailureLog = std::function<void(const std::string&)>;

  // A textfile stays within kBudgetBytes: the busiest keys of the window get series, as
  // many as fit under these caps; the rest stay in metrics/rNNNNN.jsonl.
  static constexpr size_t kBudgetBytes = 3072;
  static constexpr size_t kMaxCollectives = 4;  // (communicator, collective) pairs
  static constexpr size_t kMaxGemmShapes = 4;
  static constexpr size_t kMaxLinks = 8;        // connections with a wire-time counter

  static std::string pathFor(const std::string& dir, int rank);

  // An empty `path` makes every call a no-op. `attempt` labels every series (attempt.h: a
  // restarted job's series are told apart from its earlier launch's).
  PrometheusTextfile(std::string path, FailureLog log, std::string attempt = "");
  // A rank that ends without a hang takes its file away, so a finished job stops being
  // scraped; after a hang it stays, with hangwatch_hang 1.
  ~PrometheusTextfile();
  PrometheusTextfile(const PrometheusTextfile&) = delete;
  PrometheusTextfile& operator=(const PrometheusTextfile&) = delete;

  // The hang trigger fired (this rank detected it or saw TRIGGER.json).
  void markHang() { hang_ = true; }
  bool hang() const { return hang_; }
  // hangwatch_suspected: 1 from an early warning until this rank moved again. Rewrites the
  // file from `last` (the latest window) when one was written before.
  void markSuspected(bool suspected, const MetricsWindow& last);
  // hangwatch_dump_fallback 1, with the node-local folder the dumps go to instead.
  void markDumpFallback(const std::string& fallback_dir, const MetricsWindow& last);

  // Adds the window to the counters and rewrites the file.
  void write(const MetricsWindow& w);

  // The two halves of write(), for tests: counters first, then the file's text.
  void accumulate(const MetricsWindow& w);
  std::string text(const MetricsWindow& w) const;

 private:
  std::string attempt_;
  struct Caps {
    size_t collectives;
    size_t gemm_shapes;
    size_t links;
  };
  struct LinkKey {
    std::string comm;
    int peer = 0;
    auto operator<=>(const LinkKey&) const = default;
  };

  struct OpGroups;  // the window's ops grouped into series, busiest first
  std::string render(const MetricsWindow& w, const OpGroups& groups, const Caps& caps) const;
  void rewrite(const MetricsWindow& w);

  std::string path_;
  FailureLog log_;
  bool hang_ = false;
  std::string dump_fallback_;  // the fallback folder once the dump folder was given up
  bool suspected_ = false;
  bool failure_logged_ = false;
  bool written_ = false;
  uint64_t steps_total_ = 0;
  std::map<LinkKey, int64_t> link_wire_ns_;  // since the rank started, kMaxLinks at most
};

// Label values as the text exposition format wants them: \ " and newline escaped.
std::string escapePrometheusLabelValue(const std::string& value);

}  // namespace hangwatch::watchdog
