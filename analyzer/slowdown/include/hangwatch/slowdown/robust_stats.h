#pragma once
// Robust location and spread for cross-rank comparisons. With 4 ranks one outlier is
// a quarter of the sample: the median ignores it, the mean does not. MAD is 0 when
// most ranks agree exactly, so the spread has a floor relative to the median.
#include <optional>
#include <vector>

namespace hangwatch::slowdown {

double median(std::vector<double> values);  // 0 when empty

struct RobustSpread {
  double median = 0;
  double scale = 0;  // max(1.4826 * MAD, floor_fraction * |median|): a standard-deviation estimate
};
RobustSpread robustSpread(const std::vector<double>& values, double floor_fraction);

// How many robust scales `value` lies above (positive) or below (negative) the median.
double robustZ(double value, const RobustSpread& s);

}  // namespace hangwatch::slowdown
