#pragma once
// Bus bandwidth per communicator and collective, lined up across the members (the
// slow-link detector and the analysis' metrics both use it).
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "hangwatch/slowdown/job_profile.h"

namespace hangwatch::slowdown {

// One communicator-wide collective key: the same op on every member.
struct CollectiveKey {
  std::string comm, name;
  uint64_t bytes = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

struct CommBandwidth {
  CollectiveKey key;
  int comm_size = 0;
  std::vector<int> members;
  double busbw_gbps = 0;
  double duration_ns = 0;
  size_t instances = 0;  // aligned instances behind the figure (0: from the windows)
};

// A collective's transfer time is end - (last member's start): waiting for a late rank
// is not the link's fault. Per instance the median member end is used; per key the
// median instance. Without timelines the fastest member's mean time stands in.
std::vector<CommBandwidth> communicatorBandwidth(const JobProfile& job);

}  // namespace hangwatch::slowdown
