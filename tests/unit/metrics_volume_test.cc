#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>

#include "hangwatch/watchdog/metrics/metrics_windows.h"

using hangwatch::watchdog::CompletedOp;
using hangwatch::watchdog::MetricsConfig;
using hangwatch::watchdog::MetricsWindows;
using hangwatch::watchdog::OpClass;

namespace {

constexpr int64_t kUs = 1000;

// One ring_train-like step (examples/ring_train, defaults --layers 4 --hidden 256
// --batch 32, a world and a tensor-parallel communicator): H2D copy, forward and
// backward GEMMs of 3 shapes, AllGather + ReduceScatter on the TP pair, the gradient
// AllReduce, D2H copies, a few kernels and one stream synchronize. Durations jitter.
class RingTrainLikeJob {
 public:
  RingTrainLikeJob(MetricsWindows& m, int64_t start) : m_(m), t_(start) {}

  void step(int layers) {
    memcpy("cudaMemcpyAsync", 32 * 256 * 4);
    kernel("fill_pattern");
    for (int l = 0; l < layers; ++l) gemm(256, 32, 256);
    for (int l = 0; l < layers; ++l) {
      gemm(256, 256, 32);
      gemm(32, 256, 256);
    }
    coll("ncclAllGather", 0xa11, 2, 64 * 1024);
    coll("ncclReduceScatter", 0xa11, 2, 64 * 1024);
    coll("ncclAllReduce", 0xb0b, 4, layers * 256 * 256 * 4);
    memcpy("cudaMemcpyAsync", layers * 256 * 256 * 4);
    memcpy("cudaMemcpyAsync", 2 * 64 * 1024);
    kernel("sgd_update");
    m_.recordHostSync({"cudaStreamSynchronize", t_ - 2000 * kUs, t_});
    t_ += 3000 * kUs;  // the host prepares the next batch
  }
  int64_t now() const { return t_; }

 private:
  int64_t jitter(int64_t ns) { return ns + static_cast<int64_t>(noise_(rng_) * static_cast<double>(ns)); }
  void run(CompletedOp o, int64_t ns) {
    o.stream = 0x55aa00;
    o.host_issue_ns = t_ - jitter(40 * kUs);
    o.gpu_start_ns = t_;
    o.gpu_end_ns = t_ + jitter(ns);
    t_ = o.gpu_end_ns + jitter(5 * kUs);
    m_.record(o);
  }
  void gemm(int64_t mm, int64_t nn, int64_t kk) {
    CompletedOp o;
    o.cls = OpClass::kGemm;
    o.name = "cublasGemmEx";
    o.m = mm;
    o.n = nn;
    o.k = kk;
    o.flops = 2.0 * mm * nn * kk;
    run(o, 300 * kUs);
  }
  void coll(const char* name, uint64_t comm, int size, uint64_t bytes) {
    CompletedOp o;
    o.cls = OpClass::kCollective;
    o.name = name;
    o.comm_hash = comm;
    o.comm_size = size;
    o.bytes = bytes;
    run(o, 1500 * kUs);
  }
  void memcpy(const char* name, uint64_t bytes) {
    CompletedOp o;
    o.cls = OpClass::kMemcpy;
    o.name = name;
    o.bytes = bytes;
    run(o, 100 * kUs);
  }
  void kernel(const char* name) {
    CompletedOp o;
    o.cls = OpClass::kKernel;
    o.name = name;
    run(o, 50 * kUs);
  }

  MetricsWindows& m_;
  int64_t t_;
  std::mt19937_64 rng_{3};
  std::uniform_real_distribution<double> noise_{-0.2, 0.2};
};

}  // namespace

TEST_CASE("RingTrainLikeWindowsStayUnderTwoKilobytesPerStep") {
  char tmpl[] = "/tmp/metrics_volume_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  MetricsConfig c;
  c.rank = 0;
  c.path = dir + "/metrics/r00000.jsonl";
  c.host = "node0";
  c.start_ns = 1'000'000'000'000;
  MetricsWindows m(c);
  RingTrainLikeJob job(m, c.start_ns);
  const int kWindows = 5, kStepsPerWindow = 10;
  for (int w = 0; w < kWindows; ++w) {
    for (int s = 0; s < kStepsPerWindow; ++s) job.step(4);
    m.flush(job.now());
  }
  double bytes = static_cast<double>(std::filesystem::file_size(c.path));
  std::filesystem::remove_all(dir);
  double per_window = bytes / kWindows, per_step = per_window / kStepsPerWindow;
  WARN("metrics volume: " << per_window << " bytes per window, " << per_step << " bytes per step ("
                          << kStepsPerWindow << " ring_train-like steps per window)");
  // 3 GEMM shapes, 3 collectives, 3 copy sizes, 2 kernels.
  CHECK(m.lastWindow().ops.size() == 11);
  CHECK(per_step <= 2048);
}
