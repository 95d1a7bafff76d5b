#include "hangwatch/common/log_histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace hangwatch {

int LogHistogram::bucketOf(int64_t ns) {
  if (ns <= 1) return 0;
  int b = static_cast<int>(std::floor(std::log2(static_cast<double>(ns)) * kBucketsPerOctave));
  return std::clamp(b, 0, kBuckets - 1);
}

double LogHistogram::bucketLowerNs(int i) { return std::exp2(static_cast<double>(i) / kBucketsPerOctave); }

double LogHistogram::bucketMidNs(int i) { return std::exp2((i + 0.5) / kBucketsPerOctave); }

void LogHistogram::add(int64_t ns, uint32_t n) { addToBucket(bucketOf(ns), n); }

void LogHistogram::addToBucket(int bucket, uint64_t n) {
  // Saturate instead of wrapping; count_ stays the sum of what the buckets hold.
  uint64_t room = std::numeric_limits<uint32_t>::max() - counts_[bucket];
  uint32_t added = static_cast<uint32_t>(std::min(room, n));
  counts_[bucket] += added;
  count_ += added;
}

void LogHistogram::merge(const LogHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) {
    if (other.counts_[i] != 0) addToBucket(i, other.counts_[i]);
  }
}

void LogHistogram::clear() {
  counts_.fill(0);
  count_ = 0;
}

double LogHistogram::percentileNs(double q) const {
  if (count_ == 0) return 0;
  if (!(q >= 0)) q = 0;
  // The rank of the sample we want, 1-based, as nearest-rank percentiles define it.
  uint64_t want = static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_)));
  want = std::max<uint64_t>(want, 1);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= want) return bucketMidNs(i);
  }
  return bucketMidNs(kBuckets - 1);
}

nlohmann::json LogHistogram::toJson() const {
  nlohmann::json a = nlohmann::json::array();
  if (count_ == 0) return a;
  int first = 0, last = kBuckets - 1;
  while (counts_[first] == 0) ++first;
  while (counts_[last] == 0) --last;
  a.push_back(first);
  for (int i = first; i <= last;) {
    int run = 0;
    while (counts_[i + run] == 0) ++run;  // stops at `last`, which is non-empty
    if (run >= 2) {
      a.push_back(-run);
      i += run;
    } else {
      a.push_back(counts_[i]);
      ++i;
    }
  }
  return a;
}

Expected<LogHistogram> LogHistogram::fromJson(const nlohmann::json& j) {
  LogHistogram h;
  if (j.is_null()) return h;
  if (!j.is_array()) return Error{"histogram is not an array"};
  if (j.empty()) return h;
  if (!j[0].is_number_integer() || j[0].get<int64_t>() < 0) return Error{"histogram does not start with a bucket index"};
  int64_t bucket = j[0].get<int64_t>();
  for (size_t k = 1; k < j.size(); ++k) {
    if (!j[k].is_number_integer()) return Error{"histogram entry is not an integer"};
    int64_t v = j[k].get<int64_t>();
    if (v < 0) {
      bucket -= v;  // a run of -v empty buckets
      continue;
    }
    if (bucket >= kBuckets) return Error{"histogram buckets out of range"};
    h.addToBucket(static_cast<int>(bucket), static_cast<uint64_t>(v));
    ++bucket;
  }
  if (bucket > kBuckets) return Error{"histogram buckets out of range"};
  return h;
}

double LogHistogram::wasserstein1Ns(const LogHistogram& a, const LogHistogram& b) {
  if (a.count_ == 0 || b.count_ == 0) return 0;
  // In one dimension W1 is the integral of |CDF_a - CDF_b|; between bucket middles both
  // CDFs are constant.
  double ca = 0, cb = 0, w = 0;
  for (int i = 0; i + 1 < kBuckets; ++i) {
    ca += static_cast<double>(a.counts_[i]) / static_cast<double>(a.count_);
    cb += static_cast<double>(b.counts_[i]) / static_cast<double>(b.count_);
    w += std::abs(ca - cb) * (bucketMidNs(i + 1) - bucketMidNs(i));
  }
  return w;
}

}  // namespace hangwatch
