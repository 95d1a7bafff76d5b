#pragma once
// The POSIX shared-memory segment of one communicator: rank table, init barrier,
// and every connection (ring: per channel and rank, the link rank -> ring next;
// p2p: per ordered pair; tree: per channel and rank, the links to and from its parent;
// PAT: per channel, sending rank and dimension, one for ReduceScatter and one for AllGather).
// Each connection has NCCL_STEPS slots of `slot_bytes`.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hangwatch/common/expected.h"
#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/step_counter.h"

namespace simnccl {

constexpr int kSteps = 8;  // NCCL_STEPS: at most this many steps in flight per connection
constexpr int kNoLauncherRank = -1;

struct SlotHeader {
  uint64_t seq;  // collective sequence number the data belongs to
  uint32_t op;   // OpKind of the sender's collective
  uint32_t bytes;
};

struct Connection {
  StepCounter tail;  // steps posted by the sender
  StepCounter head;  // steps consumed by the receiver
  SlotHeader slot_header[kSteps];
};

struct RankRecord {
  std::atomic<uint32_t> joined;
  int32_t pid;
  int32_t launcher_rank;  // kNoLauncherRank when the process has none
  int32_t device;
  char host[64];
  int32_t split_color[2];  // ncclCommSplit board, double-buffered by split generation
  int32_t split_key[2];
  char node_key[kNodeKeyBytes];  // node_topology.h: equal keys, one node
  StepCounter net_doorbell;      // bumped by senders on connections between nodes (net_proxy_thread.h)
  char nic[24];                  // the NIC its connections between nodes use (net_devices.h)
  int32_t nvml_dev;              // its GPU's index on its node (gpuOnNode): NCCL's peerInfo nvmlDev
};

struct SegmentHeader {
  std::atomic<uint64_t> magic;
  std::atomic<uint32_t> nranks;
  std::atomic<uint32_t> nchannels;
  std::atomic<uint64_t> slot_bytes;
  StepCounter arrivals;        // init barrier
  StepCounter split_arrivals;  // nranks per ncclCommSplit generation
};

struct SegmentShape {
  int nranks;
  int nchannels;
  size_t slot_bytes;

  size_t connectionBytes() const;
  size_t totalBytes() const;
};

class SharedSegment {
 public:
  // Opens (creating if needed) the segment named `name`, checking that every
  // rank agrees on its shape.
  static hangwatch::Expected<SharedSegment*> open(const std::string& name, const SegmentShape& shape);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  SegmentHeader& header() { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankRecord& rank(int r);
  Connection& ringConnection(int channel, int from_rank);  // from_rank -> ring next
  Connection& p2pConnection(int from, int to);
  // Tree: `child` -> its parent (up) or its parent -> `child` (down), on `channel`.
  Connection& treeConnection(int channel, int child, bool up);
  // PAT: `from` -> from + 2^dim (ReduceScatter) or from -> from - 2^dim (AllGather), on `channel`.
  Connection& patConnection(int channel, int from, int dim, bool allgather);
  char* slotData(Connection& conn, uint64_t step);
  const SegmentShape& shape() const { return shape_; }
  void unlink();

 private:
  SharedSegment(std::string name, SegmentShape shape, char* base) : name_(std::move(name)), shape_(shape), base_(base) {}
  std::string name_;
  SegmentShape shape_;
  char* base_;
};

}  // namespace simnccl
