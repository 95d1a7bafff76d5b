#pragma once
// One NCCL operation as issued by the host, before it runs on the stream.
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace simnccl {

class Communicator;
class TaskProfile;
struct PreMulSum;

enum class OpKind : uint32_t { AllReduce = 1, AllGather, ReduceScatter, Broadcast, Reduce, Send, Recv };
enum class Algo { kRing, kTree, kPat };

const char* opName(OpKind kind);
bool isCollective(OpKind kind);

struct Op {
  OpKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // per-rank count for AllGather/ReduceScatter, like NCCL's API
  ncclDataType_t dtype;
  ncclRedOp_t redop;
  int root;  // Broadcast/Reduce
  int peer;  // Send/Recv
  uint64_t seq;  // collective sequence number on the communicator (collectives only)
  cudaStream_t stream;
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<const PreMulSum> premul = nullptr;  // a user operator: scale, then ncclSum
  std::shared_ptr<TaskProfile> profile = nullptr;     // what a profiler plugin is told of it, set at launch
  // What NCCL's task keeps of the profiler's API events (api_profile.h): the mask the
  // call saw, its GroupApi event and its CollApi/P2pApi event.
  int profiler_mask = 0;
  void* group_api_event = nullptr;
  void* api_event = nullptr;
  bool registered = false;  // a p2p buffer inside one the user registered (ncclCommRegister)
  Algo algo = Algo::kRing;  // chosen when the call is made (algorithm.h)
};

}  // namespace simnccl
