#include "hangwatch/simgpu/cuda/stream.h"

#include <pthread.h>

#include <algorithm>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/simgpu/cuda/device_clock.h"
#include "hangwatch/simgpu/cuda/runtime.h"

namespace simgpu {

Stream::Stream(int device, Kind kind, int priority, uint64_t id)
    : device_(device), kind_(kind), priority_(priority), id_(id) {}

std::shared_ptr<Stream> Stream::start(int device, Kind kind, int priority, uint64_t id) {
  auto stream = std::make_shared<Stream>(device, kind, priority, id);
  // Detached: process exit and fork must never wait for a stream that is stuck.
  std::thread(&Stream::run, stream).detach();
  return stream;
}

unsigned Stream::flags() const { return kind_ == Kind::kNonBlocking ? cudaStreamNonBlocking : cudaStreamDefault; }

Milestone Stream::submit(StreamTask task) {
  uint64_t seq;
  {
    std::lock_guard lock(mutex_);
    task.submitted = std::chrono::steady_clock::now();
    queue_.push_back(std::move(task));
    seq = ++submitted_;
  }
  queued_.notify_one();
  return Milestone{progress_, seq};
}

namespace {
thread_local const Stream* t_worker_of = nullptr;  // the stream whose worker this thread is
}  // namespace

void Stream::waitForRoom(size_t depth) {
  // A host function on the stream's own worker must not wait for the worker.
  if (depth == 0 || t_worker_of == this) return;
  std::unique_lock lock(mutex_);
  room_.wait(lock, [&] { return queue_.size() < depth || closed_; });
}

Milestone Stream::tail() {
  std::lock_guard lock(mutex_);
  return Milestone{progress_, submitted_};
}

void Stream::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  queued_.notify_one();
  room_.notify_all();
}

std::shared_ptr<CaptureSequence> Stream::capture() {
  std::lock_guard lock(mutex_);
  return capture_;
}

void Stream::setCapture(std::shared_ptr<CaptureSequence> capture) {
  std::lock_guard lock(mutex_);
  capture_ = std::move(capture);
}

void Stream::run(std::shared_ptr<Stream> self) {
  // Thread names are limited to 15 characters; debuggers and `top -H` show them.
  std::string name = self->kind_ == Kind::kLegacyDefault ? fmt::format("simgpu-legacy{}", self->device_)
                                                         : fmt::format("simgpu-s{}", self->id_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  Runtime::enterStreamThread(self->device_);
  t_worker_of = self.get();
  for (;;) {
    StreamTask task;
    {
      std::unique_lock lock(self->mutex_);
      self->queued_.wait(lock, [&] { return !self->queue_.empty() || self->closed_; });
      if (self->queue_.empty()) return;
      task = std::move(self->queue_.front());
      self->queue_.pop_front();
    }
    self->room_.notify_all();
    auto model_start = std::max(self->model_cursor_, task.submitted);
    for (const Milestone& m : task.after) {
      m.wait();
      model_start = std::max(model_start, m.modelTime());
    }
    device_clock::beginTask(model_start);
    if (task.work) {
      Runtime::setRunningKernel(task.name.c_str());
      task.work();
      Runtime::setRunningKernel(nullptr);
    } else {
      device_clock::instant();  // an ordering marker takes no device time
    }
    self->model_cursor_ = device_clock::endTask();
    task = StreamTask{};  // release captured state before signalling completion
    self->progress_->advance(self->model_cursor_);
  }
}

}  // namespace simgpu
