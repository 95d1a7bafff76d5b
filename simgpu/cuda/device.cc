#include "hangwatch/simgpu/cuda/device.h"

#include <algorithm>

namespace simgpu {

void Device::addStream(std::shared_ptr<Stream> stream) {
  std::lock_guard lock(mutex_);
  streams_.push_back(std::move(stream));
}

void Device::removeStream(const Stream* stream) {
  std::lock_guard lock(mutex_);
  std::erase_if(streams_, [&](const auto& s) { return s.get() == stream; });
}

std::shared_ptr<Stream> Device::legacyStream() {
  std::lock_guard lock(mutex_);
  if (!legacy_) legacy_ = Stream::start(ordinal_, Stream::Kind::kLegacyDefault, 0, 0);
  return legacy_;
}

std::vector<Milestone> Device::implicitDependencies(const Stream& stream) {
  std::vector<Milestone> after;
  auto addIfPending = [&](Stream& s) {
    Milestone m = s.tail();
    if (!m.reached()) after.push_back(std::move(m));
  };
  if (stream.kind() == Stream::Kind::kLegacyDefault) {
    for (auto& s : streams_)
      if (s->kind() == Stream::Kind::kBlocking) addIfPending(*s);
  } else if (stream.kind() == Stream::Kind::kBlocking && legacy_) {
    addIfPending(*legacy_);
  }
  return after;
}

Milestone Device::enqueue(Stream& stream, StreamTask task) {
  // One lock across snapshot and submit: the implicit order must be a total order.
  std::lock_guard lock(mutex_);
  for (Milestone& m : implicitDependencies(stream)) task.after.push_back(std::move(m));
  return stream.submit(std::move(task));
}

bool Device::idle(Stream& stream) {
  std::lock_guard lock(mutex_);
  if (!stream.tail().reached()) return false;
  for (const Milestone& m : implicitDependencies(stream))
    if (!m.reached()) return false;
  return true;
}

void Device::synchronize() {
  std::vector<Milestone> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& s : streams_) all.push_back(s->tail());
    if (legacy_) all.push_back(legacy_->tail());
  }
  for (const Milestone& m : all) m.wait();
}

}  // namespace simgpu
