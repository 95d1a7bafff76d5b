#include "hangwatch/simgpu/cuda/runtime.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "hangwatch/simgpu/cuda/allocation_table.h"
#include "hangwatch/simgpu/cuda/kernel_registry.h"
#include "hangwatch/simgpu/config.h"

namespace simgpu {
namespace {

// Handle values: far from 0/1/2 (legacy, per-thread) and 16-aligned like real pointers.
constexpr uint64_t kHandleBase = 0x5100000;
constexpr uint64_t kHandleStride = 16;

std::atomic<Runtime*> g_runtime{nullptr};
std::mutex g_runtime_creation;

thread_local int t_device = 0;
thread_local cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;
thread_local const char* t_running_kernel = nullptr;

// cudaStreamPerThread: one blocking stream per host thread and device, closed at thread exit.
struct PerThreadStreams {
  Runtime* owner = nullptr;
  std::map<int, std::shared_ptr<Stream>> streams;

  ~PerThreadStreams() {
    if (owner != g_runtime.load()) return;
    for (auto& [device, stream] : streams) {
      owner->device(device).removeStream(stream.get());
      stream->close();
    }
  }
};
thread_local PerThreadStreams t_per_thread;

uint64_t handleId(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

void lockForFork() {
  g_runtime_creation.lock();
  KernelRegistry::instance().lockForFork();
  AllocationTable::instance().lockForFork();
}

void unlockInParent() {
  AllocationTable::instance().unlockAfterFork();
  KernelRegistry::instance().unlockAfterFork();
  g_runtime_creation.unlock();
}

// Kernels and allocations stay valid in the child (its memory is a copy); streams
// and events do not, their workers were not forked. The old Runtime is leaked:
// its mutexes may be held by threads that no longer exist.
void resetInChild() {
  unlockInParent();
  g_runtime.store(nullptr);
  t_per_thread.owner = nullptr;
  if (!t_per_thread.streams.empty()) new std::map<int, std::shared_ptr<Stream>>(std::move(t_per_thread.streams));
  t_per_thread.streams.clear();
}

}  // namespace

Runtime::Runtime() : context_active_(new std::atomic<bool>[simConfig().device_count]) {
  for (int d = 0; d < simConfig().device_count; ++d) {
    devices_.push_back(std::make_unique<Device>(d));
    context_active_[d].store(false);
  }
}

void Runtime::noteContextUse(int device) {
  if (validDevice(device) && !context_active_[device].load(std::memory_order_relaxed))
    context_active_[device].store(true, std::memory_order_relaxed);
}

bool Runtime::contextActive(int device) const {
  return validDevice(device) && context_active_[device].load(std::memory_order_relaxed);
}

Runtime& Runtime::current() {
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) return *r;
  static std::once_flag fork_handlers;
  std::call_once(fork_handlers, [] { pthread_atfork(lockForFork, unlockInParent, resetInChild); });
  std::lock_guard lock(g_runtime_creation);
  if (Runtime* r = g_runtime.load()) return *r;
  // Never destroyed: stream workers may still run during static destruction at exit.
  auto* created = new Runtime();
  g_runtime.store(created, std::memory_order_release);
  return *created;
}

std::shared_ptr<Stream> Runtime::perThreadStream(int device) {
  if (t_per_thread.owner != this) {
    // Streams of an abandoned (pre-fork) Runtime are leaked like the Runtime itself.
    if (!t_per_thread.streams.empty()) new std::map<int, std::shared_ptr<Stream>>(std::move(t_per_thread.streams));
    t_per_thread.streams.clear();
    t_per_thread.owner = this;
  }
  auto& stream = t_per_thread.streams[device];
  if (!stream) {
    uint64_t id;
    {
      std::lock_guard lock(mutex_);
      id = kHandleBase + kHandleStride * next_id_++;
    }
    stream = Stream::start(device, Stream::Kind::kBlocking, 0, id);
    devices_[device]->addStream(stream);
  }
  return stream;
}

std::shared_ptr<Stream> Runtime::resolveStream(cudaStream_t handle) {
  noteContextUse(t_device);
  if (handle == nullptr || handle == cudaStreamLegacy) return device(t_device).legacyStream();
  if (handle == cudaStreamPerThread) return perThreadStream(t_device);
  std::lock_guard lock(mutex_);
  auto it = streams_.find(handleId(handle));
  return it == streams_.end() ? nullptr : it->second;
}

cudaStream_t Runtime::createStream(Stream::Kind kind, int priority) {
  noteContextUse(t_device);
  std::lock_guard lock(mutex_);
  uint64_t id = kHandleBase + kHandleStride * next_id_++;
  auto stream = Stream::start(t_device, kind, priority, id);
  devices_[t_device]->addStream(stream);
  streams_.emplace(id, std::move(stream));
  return reinterpret_cast<cudaStream_t>(id);
}

bool Runtime::destroyStream(cudaStream_t handle) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard lock(mutex_);
    auto it = streams_.find(handleId(handle));
    if (it == streams_.end()) return false;
    stream = std::move(it->second);
    streams_.erase(it);
  }
  devices_[stream->device()]->removeStream(stream.get());
  stream->close();
  return true;
}

cudaEvent_t Runtime::createEvent(unsigned flags) {
  noteContextUse(t_device);
  std::lock_guard lock(mutex_);
  uint64_t id = kHandleBase + kHandleStride * next_id_++;
  events_.emplace(id, std::make_shared<Event>(flags, t_device));
  return reinterpret_cast<cudaEvent_t>(id);
}

std::shared_ptr<Event> Runtime::resolveEvent(cudaEvent_t handle) {
  std::lock_guard lock(mutex_);
  auto it = events_.find(handleId(handle));
  return it == events_.end() ? nullptr : it->second;
}

bool Runtime::destroyEvent(cudaEvent_t handle) {
  std::lock_guard lock(mutex_);
  return events_.erase(handleId(handle)) == 1;
}

cudaError_t Runtime::checkStreamUse(Stream& stream, bool invalidate) {
  if (std::shared_ptr<CaptureSequence> c = stream.capture())
    return c->invalidated() ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
  if (stream.kind() != Stream::Kind::kLegacyDefault) return cudaSuccess;
  // The legacy stream would depend on every blocking stream of its device: one that is
  // capturing makes that an implicit dependency on the capture, which invalidates it.
  bool implicit = false;
  std::lock_guard lock(mutex_);
  for (auto& [id, s] : streams_) {
    if (s->device() != stream.device() || s->kind() != Stream::Kind::kBlocking) continue;
    if (std::shared_ptr<CaptureSequence> c = s->capture()) {
      if (invalidate) c->invalidate();
      implicit = true;
    }
  }
  return implicit ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

cudaError_t Runtime::submit(Stream& stream, StreamTask task, Milestone* done) {
  if (cudaError_t e = checkStreamUse(stream); e != cudaSuccess) return e;
  if (std::shared_ptr<CaptureSequence> c = stream.capture()) {
    task.after.clear();  // inside a capture, order is capture order
    c->add(GraphNode{task.name, [task](cudaStream_t launch) {
      Runtime& rt = Runtime::current();
      std::shared_ptr<Stream> s = rt.resolveStream(launch);
      if (!s) return cudaErrorInvalidResourceHandle;
      return rt.submit(*s, task);
    }});
    if (done != nullptr) *done = Milestone::passed();
    return cudaSuccess;
  }
  // A GPU's queue holds so much; a launch onto a full one waits (outside the device's lock).
  stream.waitForRoom(simConfig().launch_queue_depth);
  Milestone m = device(stream.device()).enqueue(stream, std::move(task));
  if (done != nullptr) *done = std::move(m);
  return cudaSuccess;
}

std::shared_ptr<CaptureSequence> Runtime::beginCapture(Stream& stream, cudaStreamCaptureMode mode) {
  std::lock_guard lock(mutex_);
  std::erase_if(captures_, [](const std::weak_ptr<CaptureSequence>& w) {
    auto c = w.lock();
    return !c || c->ended();
  });
  auto c = std::make_shared<CaptureSequence>(next_capture_id_++, mode, stream.device(), &stream);
  captures_.push_back(c);
  stream.setCapture(c);
  return c;
}

cudaStreamCaptureMode& Runtime::threadCaptureMode() { return t_capture_mode; }

cudaError_t Runtime::checkUnsafeCall() {
  const cudaStreamCaptureMode mode = t_capture_mode;
  if (mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  const auto me = std::this_thread::get_id();
  std::vector<std::shared_ptr<CaptureSequence>> forbidding;
  {
    std::lock_guard lock(mutex_);
    for (const auto& w : captures_) {
      auto c = w.lock();
      if (!c || c->ended() || c->mode() == cudaStreamCaptureModeRelaxed) continue;
      // Global: this thread's own captures and any other thread's global ones forbid it;
      // thread-local: only this thread's own.
      const bool own = c->thread() == me;
      if (own || (mode == cudaStreamCaptureModeGlobal && c->mode() == cudaStreamCaptureModeGlobal))
        forbidding.push_back(std::move(c));
    }
  }
  for (auto& c : forbidding) c->invalidate();
  return forbidding.empty() ? cudaSuccess : cudaErrorStreamCaptureUnsupported;
}

cudaGraph_t Runtime::addGraph(std::shared_ptr<Graph> graph) {
  std::lock_guard lock(mutex_);
  uint64_t id = kHandleBase + kHandleStride * next_id_++;
  graphs_.emplace(id, std::move(graph));
  return reinterpret_cast<cudaGraph_t>(id);
}

std::shared_ptr<Graph> Runtime::resolveGraph(cudaGraph_t handle) {
  std::lock_guard lock(mutex_);
  auto it = graphs_.find(handleId(handle));
  return it == graphs_.end() ? nullptr : it->second;
}

bool Runtime::destroyGraph(cudaGraph_t handle) {
  std::lock_guard lock(mutex_);
  return graphs_.erase(handleId(handle)) == 1;
}

cudaGraphExec_t Runtime::addGraphExec(std::shared_ptr<GraphExec> exec) {
  std::lock_guard lock(mutex_);
  uint64_t id = kHandleBase + kHandleStride * next_id_++;
  graph_execs_.emplace(id, std::move(exec));
  return reinterpret_cast<cudaGraphExec_t>(id);
}

std::shared_ptr<GraphExec> Runtime::resolveGraphExec(cudaGraphExec_t handle) {
  std::lock_guard lock(mutex_);
  auto it = graph_execs_.find(handleId(handle));
  return it == graph_execs_.end() ? nullptr : it->second;
}

bool Runtime::destroyGraphExec(cudaGraphExec_t handle) {
  std::lock_guard lock(mutex_);
  return graph_execs_.erase(handleId(handle)) == 1;
}

bool Runtime::setPeerAccess(int device, int peer, bool enable) {
  std::lock_guard lock(mutex_);
  return enable ? peer_access_.insert({device, peer}).second : peer_access_.erase({device, peer}) == 1;
}

void Runtime::enterStreamThread(int device) { t_device = device; }
void Runtime::setRunningKernel(const char* name) { t_running_kernel = name; }
const char* Runtime::runningKernel() { return t_running_kernel; }
int Runtime::threadDevice() { return t_device; }
void Runtime::setThreadDevice(int device) { t_device = device; }

}  // namespace simgpu
