#include "hangwatch/watchdog/metrics/op_key_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "hangwatch/common/nccl_bandwidth.h"

namespace hangwatch::watchdog {
std::string hexId(uint64_t v) { return fmt::format("{:#x}", v); }

std::string gemmShapeText(int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (batch > 1) return fmt::format("{}x{}x{}x{}", m, n, k, batch);
  return fmt::format("{}x{}x{}", m, n, k);
}

const char* opClassName(OpClass cls) {
  switch (cls) {
    case OpClass::kCollective: return "coll";
    case OpClass::kP2P: return "p2p";
    case OpClass::kGemm: return "gemm";
    case OpClass::kKernel: return "kernel";
    case OpClass::kMemcpy: return "memcpy";
    case OpClass::kGraph: return "graph";
  }
  return "kernel";
}

OpKeyTable::OpKeyTable(size_t max_keys) : max_keys_(max_keys) {}

OpKeyTable::KeyView OpKeyTable::keyOf(const CompletedOp& op) {
  KeyView k{op.cls, op.name ? op.name : "", 0, 0, -1, -1, 0, 0, 0, 0, 0};
  switch (op.cls) {
    case OpClass::kCollective:
    case OpClass::kGraph:
      k.comm_hash = op.comm_hash;
      k.comm_size = op.comm_size;
      k.comm_rank = op.comm_rank;
      k.bytes = op.bytes;
      break;
    case OpClass::kP2P:
      k.comm_hash = op.comm_hash;
      k.comm_size = op.comm_size;
      k.comm_rank = op.comm_rank;
      k.peer = op.peer;
      k.bytes = op.bytes;
      break;
    case OpClass::kGemm:
      k.m = op.m;
      k.n = op.n;
      k.k = op.k;
      k.batch = op.batch;
      break;
    case OpClass::kMemcpy:
      k.bytes = op.bytes;
      break;
    case OpClass::kKernel:
      break;
  }
  return k;
}

void OpKeyTable::add(const CompletedOp& op, int64_t duration_ns) {
  KeyView view = keyOf(op);
  auto it = table_.find(view);
  if (it == table_.end()) {
    if (table_.size() >= max_keys_) {
      ++other_count_;
      other_ns_ += duration_ns;
      return;
    }
    Key key{view.cls, std::string(view.name), view.comm_hash, view.comm_size, view.comm_rank, view.peer, view.bytes,
            view.m, view.n, view.k, view.batch};
    it = table_.emplace(std::move(key), Aggregate{}).first;
  }
  Aggregate& a = it->second;
  ++a.count;
  a.total_ns += duration_ns;
  a.max_ns = std::max(a.max_ns, duration_ns);
  a.durations.add(duration_ns);
  if (op.cls == OpClass::kGemm) {
    a.flops += op.flops > 0 ? op.flops
                            : 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) *
                                  static_cast<double>(op.k) * static_cast<double>(std::max<int64_t>(op.batch, 1));
  }
}

OpWindowStats OpKeyTable::statsOf(const Key& key, const Aggregate& a) {
  OpWindowStats s;
  s.cls = opClassName(key.cls);
  s.name = key.name;
  s.count = a.count;
  s.total_ns = a.total_ns;
  s.max_ns = a.max_ns;
  s.durations = a.durations;
  s.p50_ns = a.durations.percentileNs(0.50);
  s.p99_ns = a.durations.percentileNs(0.99);
  s.bytes = key.bytes;
  double mean_ns = a.count ? static_cast<double>(a.total_ns) / static_cast<double>(a.count) : 0;
  switch (key.cls) {
    case OpClass::kGemm: {
      s.shape = gemmShapeText(key.m, key.n, key.k, key.batch);
      // flops per ns is GFLOP/s.
      if (a.total_ns > 0) s.tflops = a.flops / static_cast<double>(a.total_ns) / 1e3;
      break;
    }
    case OpClass::kCollective:
    case OpClass::kP2P: {
      s.comm = hexId(key.comm_hash);
      s.comm_size = key.comm_size;
      if (key.comm_rank >= 0) s.comm_rank = key.comm_rank;
      if (key.cls == OpClass::kP2P) s.peer = key.peer;
      // nccl-tests divides the size by the mean time over iterations.
      if (mean_ns > 0) {
        double algbw = gigabytesPerSecond(ncclTestsSizeBytes(key.name, key.bytes, key.comm_size), mean_ns);
        s.algbw_gbps = algbw;
        if (auto factor = busBandwidthFactor(key.name, key.comm_size)) s.busbw_gbps = algbw * *factor;
      }
      break;
    }
    case OpClass::kMemcpy:
      if (mean_ns > 0 && key.bytes > 0) s.algbw_gbps = gigabytesPerSecond(static_cast<double>(key.bytes), mean_ns);
      break;
    case OpClass::kGraph:  // a whole replay: its collectives' bandwidth is not its duration's
      if (key.comm_hash) {
        s.comm = hexId(key.comm_hash);
        s.comm_size = key.comm_size;
        if (key.comm_rank >= 0) s.comm_rank = key.comm_rank;
      }
      break;
    case OpClass::kKernel:
      break;
  }
  return s;
}

std::vector<OpWindowStats> OpKeyTable::stats() const {
  std::vector<OpWindowStats> out;
  out.reserve(table_.size());
  for (const auto& [key, a] : table_) out.push_back(statsOf(key, a));
  return out;
}

void OpKeyTable::clear() {
  table_.clear();
  other_count_ = 0;
  other_ns_ = 0;
}

}  // namespace hangwatch::watchdog
