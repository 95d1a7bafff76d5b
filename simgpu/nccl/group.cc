#include "hangwatch/simgpu/nccl/group.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "hangwatch/simgpu/nccl/algorithm.h"
#include "hangwatch/simgpu/nccl/api_profile.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/custom_redop.h"
#include "hangwatch/simgpu/nccl/reduction.h"
#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/runtime.h"

namespace simnccl {
namespace {

thread_local int group_depth = 0;
thread_local std::vector<Op> group_ops;
thread_local std::vector<std::function<ncclResult_t()>> group_inits;
thread_local std::string last_error;

const char* dtypeTag(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "i8";
    case ncclUint8: return "u8";
    case ncclInt32: return "i32";
    case ncclUint32: return "u32";
    case ncclInt64: return "i64";
    case ncclUint64: return "u64";
    case ncclFloat16: return "f16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    case ncclBfloat16: return "bf16";
    default: return "unknown";
  }
}

const char* redopTag(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "Sum";
    case ncclProd: return "Prod";
    case ncclMax: return "MinMax";
    case ncclMin: return "MinMax";
    case ncclAvg: return "Sum";
    default: return "Sum";
  }
}

// Kernel names shaped like NCCL's, interned: the stream may keep the pointer.
const char* kernelName(const std::vector<Op>& ops) {
  static std::mutex mutex;
  static std::set<std::string> names;
  const Op& op = ops.front();
  std::string name;
  if (ops.size() > 1 || !isCollective(op.kind))
    name = "ncclDevKernel_SendRecv";
  else
    name = std::string("ncclDevKernel_") + opName(op.kind) + "_" + redopTag(op.redop) + "_" + dtypeTag(op.dtype) +
           "_" + algoName(op.algo) + "_SIMPLE";
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

// The body of one kernel (one communicator's operations), on the stream's worker
// thread: collectives on the channel threads, p2p with each peer on its own thread.
void executeKernel(const std::vector<Op>& ops) {
  Communicator& comm = *ops.front().comm;
  std::vector<Op> collectives;
  std::map<std::pair<int, OpKind>, std::vector<Op>> peer_runs;
  std::vector<std::unique_ptr<char[]>> scaled_inputs;  // user operators: each rank's input scaled first
  for (const Op& op : ops) {
    if (isCollective(op.kind)) {
      collectives.push_back(op);
      if (op.premul) {
        Op& c = collectives.back();
        const size_t n = c.kind == OpKind::ReduceScatter ? c.count * static_cast<size_t>(comm.nranks()) : c.count;
        scaled_inputs.push_back(std::make_unique<char[]>(n * dtypeSize(c.dtype) + 1));
        c.premul->scale(scaled_inputs.back().get(), c.sendbuff, n);
        c.sendbuff = scaled_inputs.back().get();
        c.redop = ncclSum;
      }
    } else {
      peer_runs[{op.peer, op.kind}].push_back(op);
    }
  }
  std::vector<std::thread> threads;
  const uint64_t launch = peer_runs.empty() ? 0 : comm.nextP2pLaunch();
  for (auto& [key, run] : peer_runs)
    threads.emplace_back([&comm, launch, run = std::move(run)] {
      pthread_setname_np(pthread_self(), "simnccl-p2p");
      comm.runPeerOps(run, launch);
    });
  if (!collectives.empty()) comm.runCollectives(std::move(collectives));
  for (auto& t : threads) t.join();
}

// NCCL launches with the communicator's device current (cudaSetDevice(comm->cudaDev) in
// group.cc, the caller's device restored after): stream 0 is that device's stream.
class CommDeviceScope {
 public:
  explicit CommDeviceScope(int device) {
    cudaGetDevice(&saved_);
    if (device != saved_) cudaSetDevice(device);
  }
  ~CommDeviceScope() {
    int now = -1;
    cudaGetDevice(&now);
    if (now != saved_) cudaSetDevice(saved_);
  }

 private:
  int saved_ = 0;
};

// A communicator's kernel runs on its own stream, as NCCL's does (its internal device
// stream, joined to the user's streams with events): it starts once every user stream
// its operations name has reached the group, and those streams go on once it finished.
struct KernelJoin {
  std::mutex mutex;
  std::condition_variable changed;
  size_t arrived = 0;
  bool finished = false;

  void arrive() {
    std::lock_guard<std::mutex> lock(mutex);
    ++arrived;
    changed.notify_all();
  }
  void awaitArrivals(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return arrived >= n; });
  }
  void finish() {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
    changed.notify_all();
  }
  void awaitFinish() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return finished; });
  }
};

struct UserStream {
  int device;
  cudaStream_t stream;
  bool operator==(const UserStream& o) const { return device == o.device && stream == o.stream; }
};

// One kernel per communicator. Each user stream of the group gets one marker where the
// group was issued: it lets every kernel that names the stream start, then waits until
// they all finished. Kernels of different communicators thus run side by side even when
// they share a user stream, and depend only on the work issued before the group.
ncclResult_t launch(std::vector<Op> ops, bool persistent = false);

// Issued to a capturing stream: a graph node that launches the operations anew at every
// launch of the graph, on the launch stream and with new sequence numbers (each execution
// of a captured collective is one op, for SIMGPU_FAULTS as for NCCL's own op count).
ncclResult_t captureLaunch(std::vector<Op> ops) {
  const cudaStream_t capturing = ops.front().stream;
  for (const Op& op : ops) op.comm->logConnections(op);  // NCCL connects while capturing
  for (auto it = ops.rbegin(); it != ops.rend(); ++it)
    if (isCollective(it->kind)) it->comm->returnCollectiveSeq();
  // A captured kernel's KernelLaunch event marks its recording into the graph, not its replays.
  std::vector<CommProfiler*> reported;
  for (const Op& op : ops) {
    CommProfiler* profiler = op.comm->profiler();
    if (profiler == nullptr || std::find(reported.begin(), reported.end(), profiler) != reported.end()) continue;
    reported.push_back(profiler);
    ProfilerHooks::stop(profiler->startKernelLaunch(ops));
  }
  const char* name = kernelName(ops);
  auto captured = std::make_shared<const std::vector<Op>>(std::move(ops));
  cudaError_t err = simgpu::captureNode(capturing, name, [captured](cudaStream_t launch_stream) {
    std::vector<Op> run = *captured;
    for (Op& op : run) {
      op.stream = launch_stream;  // the captured graph is linear: all its work is on the launch stream
      if (isCollective(op.kind)) op.seq = op.comm->nextCollectiveSeq();
    }
    return launch(std::move(run), true) == ncclSuccess ? cudaSuccess : cudaErrorLaunchFailure;
  });
  if (err != cudaSuccess) {
    setLastError(std::string("capturing ") + name + ": " + cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

ncclResult_t launch(std::vector<Op> ops, bool persistent) {
  if (!ops.empty() && simgpu::isCapturing(ops.front().stream)) return captureLaunch(std::move(ops));
  std::vector<std::pair<Communicator*, std::vector<Op>>> per_comm;
  for (Op& op : ops) {
    auto it = std::find_if(per_comm.begin(), per_comm.end(), [&](const auto& c) { return c.first == op.comm.get(); });
    if (it == per_comm.end()) it = per_comm.insert(per_comm.end(), {op.comm.get(), {}});
    it->second.push_back(std::move(op));
  }
  ncclResult_t result = ncclSuccess;
  std::vector<UserStream> user_streams;
  std::vector<std::vector<std::shared_ptr<KernelJoin>>> joins_of;  // per user stream
  for (auto& [comm, kernel_ops] : per_comm) {
    // ncclPrepareTasks' preconnect (src/group.cc:144): connections before the launch.
    for (const Op& op : kernel_ops) comm->logConnections(op);
    auto join = std::make_shared<KernelJoin>();
    size_t streams = 0;
    for (const Op& op : kernel_ops) {
      // Stream 0 is the communicator's device's (NCCL sets that device to launch).
      UserStream s{comm->device(), op.stream};
      auto it = std::find(user_streams.begin(), user_streams.end(), s);
      if (it == user_streams.end()) {
        user_streams.push_back(s);
        joins_of.emplace_back();
        it = user_streams.end() - 1;
      }
      auto& joins = joins_of[static_cast<size_t>(it - user_streams.begin())];
      if (std::find(joins.begin(), joins.end(), join) == joins.end()) {
        joins.push_back(join);
        ++streams;
      }
    }
    const char* name = kernelName(kernel_ops);
    // NCCL's KernelLaunch event around the launch (ncclLaunchKernel), then its Group and
    // task events around the proxy operations' posting (hostStreamPlanTask): stopped once
    // the proxy has the operations, long before the kernel ends. Here the kernel is
    // queued after them, which a plugin cannot tell.
    CommProfiler* profiler = comm->profiler();
    if (profiler != nullptr && !persistent) ProfilerHooks::stop(profiler->startKernelLaunch(kernel_ops));
    void* group_event = profiler != nullptr ? profiler->startGroup(kernel_ops) : nullptr;
    std::vector<std::shared_ptr<TaskProfile>> tasks;
    for (Op& op : kernel_ops)
      if ((op.profile = comm->profileLaunch(op, persistent, group_event))) tasks.push_back(op.profile);
    CommDeviceScope on_device(comm->device());
    cudaError_t err = simgpu::enqueue(comm->kernelStream(), name, [join, streams, ops = std::move(kernel_ops)] {
      join->awaitArrivals(streams);
      executeKernel(ops);
      join->finish();
    });
    for (const auto& task : tasks) task->stopTask();
    ProfilerHooks::stop(group_event);
    if (err != cudaSuccess) {
      join->finish();
      setLastError(std::string("launching ") + name + ": " + cudaGetErrorString(err));
      result = ncclUnhandledCudaError;
    }
  }
  for (size_t i = 0; i < user_streams.size(); ++i) {
    CommDeviceScope on_device(user_streams[i].device);
    cudaError_t err = simgpu::enqueue(user_streams[i].stream, "ncclGroupStreamJoin", [joins = joins_of[i]] {
      for (const auto& j : joins) j->arrive();
      for (const auto& j : joins) j->awaitFinish();
    });
    if (err != cudaSuccess) {
      for (const auto& j : joins_of[i]) j->arrive();
      setLastError(std::string("joining streams for a group: ") + cudaGetErrorString(err));
      result = ncclUnhandledCudaError;
    }
  }
  // A dead rank's kernel stalls on its GPU (Communicator::runOnChannel); the call returns as
  // NCCL's does once the work is queued (src/enqueue.cc, ncclLaunchKernel), and the host runs
  // on until it synchronizes with the stream.
  return result;
}

}  // namespace

const char* opName(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return "AllReduce";
    case OpKind::AllGather: return "AllGather";
    case OpKind::ReduceScatter: return "ReduceScatter";
    case OpKind::Broadcast: return "Broadcast";
    case OpKind::Reduce: return "Reduce";
    case OpKind::Send: return "Send";
    case OpKind::Recv: return "Recv";
  }
  return "Unknown";
}

bool isCollective(OpKind kind) { return kind != OpKind::Send && kind != OpKind::Recv; }

ncclResult_t groupStart() {
  ++group_depth;
  return ncclSuccess;
}

bool inGroup() { return group_depth > 0; }

int groupDepth() { return group_depth; }

ncclResult_t runGroupInits() {
  ncclResult_t result = ncclSuccess;
  auto inits = std::move(group_inits);
  group_inits.clear();
  if (!inits.empty()) {
    std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
    for (auto& t : threads) t.join();
    for (ncclResult_t r : results)
      if (r != ncclSuccess) result = r;
  }
  return result;
}

// The ring time of one operation at the modeled link speed, in microseconds.
double modeledMicroseconds(const Op& op) {
  const Communicator& c = *op.comm;
  const double bytes = static_cast<double>(op.count) * static_cast<double>(dtypeSize(op.dtype));
  const int n = c.nranks();
  double factor = 1.0;
  if (op.kind == OpKind::AllReduce) factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  if (op.kind == OpKind::AllGather || op.kind == OpKind::ReduceScatter) factor = n > 1 ? static_cast<double>(n - 1) : 0.0;
  const double gbps = simgpu::simConfig().link_gbps * simgpu::simConfig().nchannels;
  return gbps > 0 ? bytes * factor / (gbps * 1e9) * 1e6 : 0.0;
}

// ncclGroupEndInternal, with the profiler's GroupApi states at its entry and exit.
ncclResult_t groupEnd() {
  if (group_depth == 0) {
    setLastError("ncclGroupEnd without ncclGroupStart");
    api_profile::groupEndExited();
    return ncclInvalidUsage;
  }
  api_profile::groupEndEntered();
  ncclResult_t result = ncclSuccess;
  if (--group_depth == 0) {
    result = runGroupInits();
    auto ops = std::move(group_ops);
    group_ops.clear();
    if (!ops.empty()) {
      const bool nonblocking =
          std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.comm->nonblocking.load(); });
      ncclResult_t r = nonblocking && result == ncclSuccess ? launchAsync(std::move(ops)) : launch(std::move(ops));
      if (r != ncclSuccess) result = r;
    }
  }
  api_profile::groupEndExited();
  return result;
}

ncclResult_t launchAsync(std::vector<Op> ops) {
  std::vector<std::shared_ptr<Communicator>> comms;
  for (const Op& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  for (auto& c : comms) c->pending.store(ncclInProgress);
  std::thread([comms, ops = std::move(ops)]() mutable {
    const ncclResult_t r = launch(std::move(ops));
    for (auto& c : comms) c->pending.store(r, std::memory_order_release);
  }).detach();
  return ncclInProgress;
}

// The outermost ncclGroupSimulateEnd: nothing runs, the seqs are given back.
static ncclResult_t simulateGroup(ncclSimInfo_t* sim) {
  auto ops = std::move(group_ops);
  group_ops.clear();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it)
    if (isCollective(it->kind)) it->comm->returnCollectiveSeq();
  constexpr unsigned kSimInfoMagic = 0x74685283;  // NCCL_SIM_INFO_INITIALIZER
  if (sim != nullptr && sim->magic != kSimInfoMagic) {
    group_inits.clear();
    setLastError("ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
    return ncclInvalidArgument;
  }
  ncclResult_t result = runGroupInits();
  if (sim != nullptr) {
    double us = 0;
    for (const Op& op : ops) us += modeledMicroseconds(op);
    sim->estimatedTime = static_cast<float>(us);
  }
  return result;
}

ncclResult_t groupSimulateEnd(ncclSimInfo_t* sim) {
  if (group_depth == 0) {
    setLastError("ncclGroupSimulateEnd: not in a group call");
    api_profile::groupEndExited();
    return ncclInvalidUsage;
  }
  api_profile::groupEndEntered();
  const ncclResult_t result = --group_depth > 0 ? ncclSuccess : simulateGroup(sim);
  api_profile::groupEndExited();
  return result;
}

ncclResult_t submit(Op op) {
  if (inGroup()) {
    group_ops.push_back(std::move(op));
    return ncclSuccess;
  }
  return launch({std::move(op)});
}

void deferInit(std::function<ncclResult_t()> init) { group_inits.push_back(std::move(init)); }

void setLastError(const std::string& message) {
  last_error = message;
  std::fprintf(stderr, "simnccl: %s\n", message.c_str());
}

const char* lastError() { return last_error.c_str(); }

}  // namespace simnccl
