#include "hangwatch/slowdown/robust_stats.h"

#include <algorithm>
#include <cmath>

namespace hangwatch::slowdown {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

RobustSpread robustSpread(const std::vector<double>& values, double floor_fraction) {
  RobustSpread s;
  s.median = median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double v : values) deviations.push_back(std::abs(v - s.median));
  // 1.4826 makes the MAD estimate the standard deviation of a normal sample.
  s.scale = std::max(1.4826 * median(std::move(deviations)), floor_fraction * std::abs(s.median));
  return s;
}

double robustZ(double value, const RobustSpread& s) {
  if (s.scale <= 0) return value == s.median ? 0 : (value > s.median ? INFINITY : -INFINITY);
  return (value - s.median) / s.scale;
}

}  // namespace hangwatch::slowdown
