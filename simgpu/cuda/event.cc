#include "hangwatch/simgpu/cuda/event.h"

#include "hangwatch/simgpu/cuda/device.h"
#include "hangwatch/simgpu/cuda/device_clock.h"

namespace simgpu {

void Event::record(const std::shared_ptr<Event>& self, Device& device, Stream& stream) {
  // Held across the enqueue so a query never sees a half-made record; the worker
  // takes only this mutex (in stamp) and holds no other lock meanwhile.
  std::lock_guard lock(mutex_);
  uint64_t generation = ++generation_;
  stamped_at_.reset();
  captured_ = false;
  capture_.reset();
  StreamTask marker{"cudaEventRecord", [self, generation] { self->stamp(generation); }, {}};
  record_ = device.enqueue(stream, std::move(marker));
}

void Event::recordCaptured(std::shared_ptr<CaptureSequence> capture, Stream* stream) {
  std::lock_guard lock(mutex_);
  ++generation_;
  captured_ = true;
  capture_ = capture;
  captured_on_ = stream;
}

bool Event::captured() {
  std::lock_guard lock(mutex_);
  return captured_;
}

std::shared_ptr<CaptureSequence> Event::activeCapture(Stream** recorded_on) {
  std::lock_guard lock(mutex_);
  auto c = captured_ ? capture_.lock() : nullptr;
  if (!c || c->ended()) return nullptr;
  if (recorded_on != nullptr) *recorded_on = captured_on_;
  return c;
}

void Event::stamp(uint64_t generation) {
  auto now = device_clock::instant();  // the device's time, not when the worker got a CPU
  std::lock_guard lock(mutex_);
  if (generation == generation_) stamped_at_ = now;
}

std::optional<Milestone> Event::lastRecord() {
  std::lock_guard lock(mutex_);
  return record_;
}

cudaError_t Event::query() {
  std::optional<Milestone> record = lastRecord();
  return !record || record->reached() ? cudaSuccess : cudaErrorNotReady;
}

void Event::synchronize() {
  if (std::optional<Milestone> record = lastRecord()) record->wait();
}

std::optional<std::chrono::steady_clock::time_point> Event::completedAt() {
  std::lock_guard lock(mutex_);
  if (!record_ || !record_->reached()) return std::nullopt;
  return stamped_at_;
}

}  // namespace simgpu
