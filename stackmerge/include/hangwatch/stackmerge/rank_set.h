#pragma once
// A set of ranks stored as sorted disjoint closed intervals: compact for 10,000+ ranks,
// since ranks that behave alike are mostly contiguous (whole nodes, whole rings).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangwatch/common/expected.h"

namespace hangwatch::stackmerge {

class RankSet {
 public:
  RankSet() = default;
  void insert(int rank);  // O(1) amortized when ranks arrive ascending
  void insertAll(const RankSet& other);
  bool contains(int rank) const;
  size_t size() const;  // number of ranks
  bool empty() const;
  std::vector<int> toVector() const;
  const std::vector<std::pair<int, int>>& intervals() const;  // [first, last] inclusive
  std::string toString() const;                               // "0-3,7,9-12"; "" when empty
  static Expected<RankSet> parse(std::string_view text);      // inverse of toString
  friend bool operator==(const RankSet&, const RankSet&) = default;

 private:
  std::vector<std::pair<int, int>> intervals_;
  size_t size_ = 0;
};

}  // namespace hangwatch::stackmerge
