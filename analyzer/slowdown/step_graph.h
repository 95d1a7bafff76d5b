#pragma once
// The dependency graph behind critical_path.h: every rank's ops in wall time, their stream
// order, collective instances and matched transfers, and the steps they belong to.
// Private to the slowdown library.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hangwatch/slowdown/critical_path.h"

namespace hangwatch::slowdown::step_graph {

struct Node {
  int rank = -1;
  const TimelineOp* op = nullptr;
  int64_t issue = 0, start = 0, end = 0;  // wall ns
  int stream_prev = -1;                   // node index of the op before it on its stream
  int step = -1;                          // index into Graph::steps, -1 outside every step
  int collective = -1;                    // index into Graph::collectives
  int peer = -1;                          // the matched send or receive of a transfer
  int group = -1;                         // first node of its kernel (a group of transfers is one)
  int local = -1;                         // its index in its step's `nodes`
};

struct Step {
  uint64_t id = 0;
  int64_t start = 0, end = 0;         // wall ns: the previous and this step's end on the last rank
  std::map<int, int64_t> rank_start;  // each rank's previous step end (wall)
  std::map<int, int> closing;         // each rank's node that closes the step
  std::vector<int> nodes;             // every rank's nodes of the step
};

struct Graph {
  std::vector<Node> nodes;                    // per rank, by start
  std::vector<std::vector<int>> collectives;  // member nodes
  std::vector<Step> steps;
  std::map<int, std::pair<int, int>> rank_nodes;               // rank -> [first, last) node index
  std::map<int, std::vector<std::pair<int64_t, int>>> by_end;  // rank -> (end, node), ascending
  std::map<int, const TimelineOp*> first_op;                    // rank -> its timeline's ops (index = op - this)
  std::vector<std::string> notes;
};

Graph build(const std::map<int, RankTimeline>& ranks);

// The nodes whose start the end of `n` waited for: a collective's other members, the
// peers of every transfer in its kernel.
std::vector<int> partners(const Graph& g, int n);

// The op before `n` on its rank that it waited for: its stream's, or, when its host issued
// it after that one ended, whatever ended last on the GPU before the host issued it.
int predecessor(const Graph& g, int n, int64_t launch_gap_ns);

// The critical path of one step, oldest segment first, and the latest end of every node of
// the step that does not make it end later (slack = latest end - end), by Node::local.
std::vector<PathSegment> walk(const Graph& g, const Step& s, int64_t launch_gap_ns);
std::vector<int64_t> latestEnds(const Graph& g, int step, int64_t launch_gap_ns);

}  // namespace hangwatch::slowdown::step_graph
