#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/nccl_bandwidth.h"

using hangwatch::LogHistogram;

namespace {

// Nearest-rank percentile of the exact samples, the definition the histogram follows.
double exactPercentile(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return static_cast<double>(v[std::max<size_t>(rank, 1) - 1]);
}

}  // namespace

TEST_CASE("PercentilesFromTheHistogramAreWithinHalfABucket") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(50000.0), 0.8);
  std::vector<int64_t> samples;
  LogHistogram h;
  for (int i = 0; i < 20000; ++i) {
    int64_t ns = static_cast<int64_t>(dist(rng)) + 1;
    samples.push_back(ns);
    h.add(ns);
  }
  // A value is read at its bucket's geometric middle: off by at most 2^(1/8) - 1.
  const double bound = std::exp2(1.0 / 8) - 1 + 1e-9;
  for (double q : {0.01, 0.25, 0.5, 0.9, 0.99, 1.0}) {
    double exact = exactPercentile(samples, q);
    double est = h.percentileNs(q);
    INFO("q=" << q << " exact=" << exact << " estimate=" << est);
    CHECK(std::abs(est - exact) / exact <= bound);
  }
  CHECK(h.count() == samples.size());
}

TEST_CASE("EmptyHistogramHasZeroPercentiles") {
  LogHistogram h;
  CHECK(h.percentileNs(0.5) == 0);
  CHECK(h.toJson().empty());
}

TEST_CASE("ExtremeDurationsLandInTheEdgeBuckets") {
  LogHistogram h;
  h.add(-5);
  h.add(0);
  h.add(int64_t{1} << 62);
  CHECK(h.at(0) == 2);
  CHECK(h.at(LogHistogram::kBuckets - 1) == 1);
}

TEST_CASE("HistogramJsonKeepsOnlyTheOccupiedRange") {
  LogHistogram h;
  h.add(1000, 3);
  h.add(1200, 1);  // the next bucket
  h.add(4000, 2);
  nlohmann::json j = h.toJson();
  int first = LogHistogram::bucketOf(1000), last = LogHistogram::bucketOf(4000);
  REQUIRE(LogHistogram::bucketOf(1200) == first + 1);
  // The first bucket index, two counts, the empty run between as one negative entry, the last count.
  CHECK(j == nlohmann::json::array({first, 3, 1, -(last - first - 2), 2}));
  auto back = LogHistogram::fromJson(nlohmann::json::parse(j.dump()));
  REQUIRE(back.ok());
  for (int i = 0; i < LogHistogram::kBuckets; ++i) CHECK(back->at(i) == h.at(i));
  CHECK(back->count() == 6);
}

TEST_CASE("BimodalHistogramStaysShortInJson") {
  LogHistogram h;
  h.add(0, 4);           // issue latency collapsed to nothing
  h.add(50'000'000, 9);  // host 50 ms ahead
  h.add(60'000'000, 6);
  nlohmann::json j = h.toJson();
  CHECK(j.size() <= 6);
  auto back = LogHistogram::fromJson(j);
  REQUIRE(back.ok());
  for (int i = 0; i < LogHistogram::kBuckets; ++i) CHECK(back->at(i) == h.at(i));
}

TEST_CASE("SingleEmptyBucketIsWrittenAsZero") {
  LogHistogram h;
  int b = LogHistogram::bucketOf(1000);
  h.add(1000);
  h.add(static_cast<int64_t>(LogHistogram::bucketLowerNs(b + 2)) + 1);  // one empty bucket between
  CHECK(h.toJson() == nlohmann::json::array({LogHistogram::bucketOf(1000), 1, 0, 1}));
}

TEST_CASE("HistogramReaderRejectsOutOfRangeBuckets") {
  CHECK_FALSE(LogHistogram::fromJson(nlohmann::json::parse("[159, 1, 1]")).ok());
  CHECK_FALSE(LogHistogram::fromJson(nlohmann::json::parse("[-1, 1]")).ok());
  CHECK_FALSE(LogHistogram::fromJson(nlohmann::json::parse("[3, -200, 1]")).ok());
  CHECK_FALSE(LogHistogram::fromJson(nlohmann::json::parse("[3, 1.5]")).ok());
  CHECK_FALSE(LogHistogram::fromJson(nlohmann::json::parse("{\"a\": 1}")).ok());
  CHECK(LogHistogram::fromJson(nlohmann::json::parse("[159, 4]")).ok());
}

TEST_CASE("MergedHistogramsCountEverySample") {
  LogHistogram a, b;
  a.add(100, 2);
  b.add(100, 1);
  b.add(1e6, 1);
  a.merge(b);
  CHECK(a.count() == 4);
  CHECK(a.at(LogHistogram::bucketOf(100)) == 3);
}

TEST_CASE("WassersteinDistanceIsZeroForEqualAndTheShiftForShiftedDistributions") {
  LogHistogram a, b, c;
  for (int i = 0; i < 100; ++i) {
    a.add(10000);
    b.add(10000);
    c.add(80000);  // three octaves higher
  }
  CHECK(LogHistogram::wasserstein1Ns(a, b) == Approx(0).margin(1e-9));
  double w = LogHistogram::wasserstein1Ns(a, c);
  // Both point masses sit at bucket middles; their distance is the shift within a bucket.
  CHECK(w == Approx(LogHistogram::bucketMidNs(LogHistogram::bucketOf(80000)) -
                    LogHistogram::bucketMidNs(LogHistogram::bucketOf(10000))));
  CHECK(w == Approx(70000).epsilon(0.1));
  CHECK(LogHistogram::wasserstein1Ns(a, LogHistogram{}) == 0);
}

TEST_CASE("BusBandwidthFactorsFollowNcclTests") {
  using hangwatch::busBandwidthFactor;
  CHECK(*busBandwidthFactor("ncclAllReduce", 4) == Approx(1.5));
  CHECK(*busBandwidthFactor("ncclAllReduce", 8) == Approx(1.75));
  CHECK(*busBandwidthFactor("ncclAllGather", 4) == Approx(0.75));
  CHECK(*busBandwidthFactor("ncclReduceScatter", 8) == Approx(0.875));
  CHECK(*busBandwidthFactor("ncclBroadcast", 8) == 1.0);
  CHECK(*busBandwidthFactor("ncclReduce", 8) == 1.0);
  CHECK(*busBandwidthFactor("ncclSend", 2) == 1.0);
  CHECK(*busBandwidthFactor("AllReduce", 2) == Approx(1.0));
  CHECK_FALSE(busBandwidthFactor("ncclCommSplit", 4));
  CHECK_FALSE(busBandwidthFactor("ncclAllReduce", 0));
}

TEST_CASE("NcclTestsSizeCountsTheWholeGatheredOrScatteredBuffer") {
  using hangwatch::ncclTestsSizeBytes;
  CHECK(ncclTestsSizeBytes("ncclAllGather", 1000, 4) == 4000);
  CHECK(ncclTestsSizeBytes("ncclReduceScatter", 1000, 4) == 4000);
  CHECK(ncclTestsSizeBytes("ncclAllReduce", 1000, 4) == 1000);
  CHECK(ncclTestsSizeBytes("ncclBroadcast", 1000, 4) == 1000);
  CHECK(hangwatch::gigabytesPerSecond(1e9, 1e9) == Approx(1.0));
}
