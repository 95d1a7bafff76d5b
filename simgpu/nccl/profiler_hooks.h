#pragma once
// simnccl's side of NCCL's profiler plugin API (v5): like NCCL, it loads the library
// NCCL_PROFILER_PLUGIN names, initialises it per communicator (with its commId, name,
// nNodes, nranks and rank), and reports what a network transport's proxy would on the
// connections between nodes (links inside a node are P2P and report nothing): one send
// ProxyOp per (operation, channel, peer) and one ProxyStep per step, handed to the
// "network" (SendWait) when the step is posted and stopped when the link model has
// carried it. Receives are not reported.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "hangwatch/nccl_profiler_v5.h"

namespace simnccl {

class ProfilerHooks {
 public:
  // Null when no plugin is configured or it asked for no proxy events.
  static std::unique_ptr<ProfilerHooks> attach(uint64_t comm_id, const char* comm_name, int nnodes, int nranks,
                                               int rank);
  ~ProfilerHooks();
  ProfilerHooks(const ProfilerHooks&) = delete;
  ProfilerHooks& operator=(const ProfilerHooks&) = delete;

  void* startSendOp(int channel, int peer, size_t chunk_bytes);
  void stopOp(void* op);
  void* startStep(void* op, int step);
  void stepOnWire(void* step, size_t bytes);
  void stopStep(void* step);

 private:
  ProfilerHooks(const hangwatch::nccl_profiler::ProfilerV5* plugin, void* context, int mask, int rank);

  const hangwatch::nccl_profiler::ProfilerV5* plugin_;
  void* context_;
  int mask_;
  int rank_;
};

// FNV-1a of the communicator's shared-segment name: the same on every member.
uint64_t communicatorId(const char* segment_name);

}  // namespace simnccl
