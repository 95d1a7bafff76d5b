#include "hangwatch/stackmerge/rank_set.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

namespace hangwatch::stackmerge {
namespace {

// 64-bit arithmetic, so neighbours of INT_MAX / INT_MIN do not overflow.
int64_t after(int rank) { return static_cast<int64_t>(rank) + 1; }
int64_t before(int rank) { return static_cast<int64_t>(rank) - 1; }
size_t width(int first, int last) { return static_cast<size_t>(static_cast<int64_t>(last) - first) + 1; }

}  // namespace

void RankSet::insert(int rank) {
  if (intervals_.empty() || rank > after(intervals_.back().second)) {
    intervals_.emplace_back(rank, rank);
    ++size_;
    return;
  }
  if (rank == after(intervals_.back().second)) {
    ++intervals_.back().second;
    ++size_;
    return;
  }
  if (rank >= intervals_.back().first) return;

  // Out of order: find the first interval that ends at or after rank - 1.
  auto it = std::lower_bound(intervals_.begin(), intervals_.end(), before(rank),
                             [](const std::pair<int, int>& iv, int64_t r) { return iv.second < r; });
  if (it->first <= rank && rank <= it->second) return;
  ++size_;
  if (it->second == before(rank)) {
    it->second = rank;
    auto next = std::next(it);
    if (next != intervals_.end() && next->first == after(rank)) {
      it->second = next->second;
      intervals_.erase(next);
    }
    return;
  }
  if (it->first == after(rank)) {
    it->first = rank;
    return;
  }
  intervals_.insert(it, {rank, rank});
}

void RankSet::insertAll(const RankSet& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = other;
    return;
  }
  std::vector<std::pair<int, int>> merged;
  merged.reserve(intervals_.size() + other.intervals_.size());
  std::merge(intervals_.begin(), intervals_.end(), other.intervals_.begin(), other.intervals_.end(),
             std::back_inserter(merged));
  intervals_.clear();
  size_ = 0;
  for (const auto& iv : merged) {
    if (!intervals_.empty() && iv.first <= after(intervals_.back().second)) {
      intervals_.back().second = std::max(intervals_.back().second, iv.second);
    } else {
      intervals_.push_back(iv);
    }
  }
  for (const auto& iv : intervals_) size_ += width(iv.first, iv.second);
}

bool RankSet::contains(int rank) const {
  auto it = std::lower_bound(intervals_.begin(), intervals_.end(), rank,
                             [](const std::pair<int, int>& iv, int r) { return iv.second < r; });
  return it != intervals_.end() && it->first <= rank;
}

size_t RankSet::size() const { return size_; }

bool RankSet::empty() const { return size_ == 0; }

std::vector<int> RankSet::toVector() const {
  std::vector<int> out;
  out.reserve(size_);
  for (const auto& [first, last] : intervals_)
    for (int r = first;; ++r) {
      out.push_back(r);
      if (r == last) break;
    }
  return out;
}

const std::vector<std::pair<int, int>>& RankSet::intervals() const { return intervals_; }

std::string RankSet::toString() const {
  std::string out;
  for (const auto& [first, last] : intervals_) {
    if (!out.empty()) out += ',';
    if (last != first) fmt::format_to(std::back_inserter(out), "{}-{}", first, last);
    else fmt::format_to(std::back_inserter(out), "{}", first);
  }
  return out;
}

namespace {

// Parses one (possibly negative) integer at the front of `text` and consumes it.
bool takeInt(std::string_view& text, int& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr == text.data()) return false;
  text.remove_prefix(static_cast<size_t>(ptr - text.data()));
  return true;
}

}  // namespace

Expected<RankSet> RankSet::parse(std::string_view text) {
  RankSet set;
  const std::string whole(text);
  while (!text.empty()) {
    int first = 0;
    if (!takeInt(text, first)) return Error{"rank set \"" + whole + "\": expected a rank"};
    int last = first;
    if (!text.empty() && text.front() == '-') {
      text.remove_prefix(1);
      if (!takeInt(text, last)) return Error{"rank set \"" + whole + "\": expected a rank after '-'"};
      if (last < first) return Error{"rank set \"" + whole + "\": descending range"};
    }
    if (!set.intervals_.empty() && first <= after(set.intervals_.back().second))
      return Error{"rank set \"" + whole + "\": ranges must be ascending and disjoint"};
    set.intervals_.emplace_back(first, last);
    set.size_ += width(first, last);
    if (text.empty()) break;
    if (text.front() != ',') return Error{"rank set \"" + whole + "\": expected ','"};
    text.remove_prefix(1);
    if (text.empty()) return Error{"rank set \"" + whole + "\": trailing ','"};
  }
  return set;
}

}  // namespace hangwatch::stackmerge
