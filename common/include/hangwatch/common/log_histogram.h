#pragma once
// A fixed log-scale histogram of nanosecond durations: bounded memory whatever the
// number of samples, percentiles within one bucket, and the same bucket edges on
// every rank so the analyzer can compare distributions (Wasserstein-1) directly.
#include <array>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"

namespace hangwatch {

class LogHistogram {
 public:
  // Bucket i holds [2^(i/4), 2^((i+1)/4)) ns: 4 buckets per octave (~19% wide, so a
  // percentile read at the bucket's geometric middle is off by at most ~9%); bucket 0
  // also takes everything below 1 ns, the last one everything above ~2^40 ns (18 min).
  static constexpr int kBucketsPerOctave = 4;
  static constexpr int kBuckets = 40 * kBucketsPerOctave;

  static int bucketOf(int64_t ns);
  static double bucketLowerNs(int i);
  // Geometric middle of a bucket: the value percentiles and means are read at.
  static double bucketMidNs(int i);

  void add(int64_t ns, uint32_t n = 1);
  void merge(const LogHistogram& other);
  void clear();

  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  uint32_t at(int bucket) const { return counts_[bucket]; }
  // q in [0, 1]; 0 when empty.
  double percentileNs(double q) const;

  // Compact JSON: [first non-empty bucket, then one count per bucket up to the last
  // non-empty one, a run of z >= 2 empty buckets written as -z]; [] when empty.
  // Example: [39, 3, -7, 2] is 3 samples in bucket 39 and 2 in bucket 47.
  nlohmann::json toJson() const;
  static Expected<LogHistogram> fromJson(const nlohmann::json& j);

  // Wasserstein-1 (earth mover's) distance in ns between the two normalised
  // distributions, with every sample at its bucket's middle; 0 if either is empty.
  static double wasserstein1Ns(const LogHistogram& a, const LogHistogram& b);

 private:
  void addToBucket(int bucket, uint64_t n);

  std::array<uint32_t, kBuckets> counts_{};
  uint64_t count_ = 0;
};

}  // namespace hangwatch
