#pragma once
// Per-window aggregates by op key, with a cap on distinct keys so a job that launches
// ever-new kernel names or shapes still uses bounded memory: ops whose key does not
// fit land in one "other" counter.
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/watchdog/metrics/op_record.h"

namespace hangwatch::watchdog {

const char* opClassName(OpClass cls);
// How the metrics windows and the timeline name handles and GEMM shapes, so the analyzer can join them.
std::string hexId(uint64_t v);
std::string gemmShapeText(int64_t m, int64_t n, int64_t k, int64_t batch);

class OpKeyTable {
 public:
  explicit OpKeyTable(size_t max_keys);

  void add(const CompletedOp& op, int64_t duration_ns);
  size_t keys() const { return table_.size(); }
  uint64_t otherCount() const { return other_count_; }
  int64_t otherNs() const { return other_ns_; }
  // The window's per-key stats with percentiles, TFLOPS and bandwidths filled in.
  std::vector<OpWindowStats> stats() const;
  void clear();

 private:
  // Only the fields that identify the op's class of work; the rest are zero.
  struct Key {
    OpClass cls;
    std::string name;
    uint64_t comm_hash;
    int comm_size;
    int comm_rank;
    int peer;
    uint64_t bytes;
    int64_t m, n, k, batch;
  };
  struct KeyView {
    OpClass cls;
    std::string_view name;
    uint64_t comm_hash;
    int comm_size;
    int comm_rank;
    int peer;
    uint64_t bytes;
    int64_t m, n, k, batch;
  };
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return tie(a) < tie(b);
    }
    template <typename K>
    static auto tie(const K& k) {
      return std::make_tuple(k.cls, std::string_view(k.name), k.comm_hash, k.comm_size, k.comm_rank, k.peer,
                             k.bytes, k.m, k.n, k.k, k.batch);
    }
  };
  struct Aggregate {
    uint64_t count = 0;
    int64_t total_ns = 0;
    int64_t max_ns = 0;
    double flops = 0;
    LogHistogram durations;
  };

  static KeyView keyOf(const CompletedOp& op);
  static OpWindowStats statsOf(const Key& key, const Aggregate& a);

  size_t max_keys_;
  std::map<Key, Aggregate, KeyLess> table_;
  uint64_t other_count_ = 0;
  int64_t other_ns_ = 0;
};

}  // namespace hangwatch::watchdog
