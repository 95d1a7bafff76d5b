#pragma once
// One finding of `forensics analyze` (DESIGN.md §5, contract: the JSON field names).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hangwatch::slowdown {

struct RingLink {
  int from = -1;  // global ranks
  int to = -1;
};

struct SlowdownFinding {
  std::string kind;        // slow-gpu | slow-link | issue-stall | host-stall | dataloader-stall | void
  std::vector<int> ranks;
  std::optional<RingLink> link;
  std::string communicator;  // hex hash, "" when not about a communicator
  std::string metric;
  double value = 0;
  double group_median = 0;
  std::string owner;       // operations | infrastructure | algorithm
  std::vector<std::string> evidence;
};

nlohmann::json toJson(const SlowdownFinding& f);

}  // namespace hangwatch::slowdown
