#include "hangwatch/watchdog/device_timers.h"

#include "hangwatch/watchdog/device_scope.h"

namespace hangwatch::watchdog {

DeviceTimer* DeviceTimers::create(int device) {
  std::lock_guard<std::mutex> lock(create_mutex_);
  if (DeviceTimer* t = timers_[device].load(std::memory_order_acquire)) return t;
  DeviceScope on_device(device);
  auto timer = std::make_unique<DeviceTimer>(api_, device, events_per_device_);
  auto filled = timer->pool().fill();
  if (!filled && on_fill_failure) on_fill_failure(device, filled.error());
  // Two events per timed op: a pool without a pair would only count exhaustion.
  if (timer->pool().created() < 2) {
    timer->pool().destroyIdle();
    failed_[device].store(true, std::memory_order_relaxed);
    return nullptr;
  }
  int none = -1;
  if (first_device_.compare_exchange_strong(none, device, std::memory_order_relaxed) && on_first_timer)
    on_first_timer();
  owned_[device] = std::move(timer);
  timers_[device].store(owned_[device].get(), std::memory_order_release);
  return owned_[device].get();
}

void DeviceTimers::forEach(const std::function<void(DeviceTimer&)>& fn) const {
  for (const auto& slot : timers_) {
    if (DeviceTimer* t = slot.load(std::memory_order_acquire)) fn(*t);
  }
}

void DeviceTimers::keepCalibrated(int64_t now_ns) const {
  forEach([&](DeviceTimer& t) {
    t.keepCalibrated(now_ns, GpuClock::kRecalibrateNs);
    if (t.calibrationFailed() && on_calibration_failure) on_calibration_failure(t.device());
  });
}

uint64_t DeviceTimers::exhausted() const {
  uint64_t n = 0;
  forEach([&](DeviceTimer& t) { n += t.pool().exhausted(); });
  return n;
}

}  // namespace hangwatch::watchdog
