#pragma once
// One DeviceTimer per CUDA device the process times work on, made on the calling thread
// when the first timed operation on that device arrives. Events are made on the current
// device, so for another device the thread's device is switched for the creation and
// restored, as NCCL itself does around its launches.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "hangwatch/watchdog/device_timer.h"
#include "hangwatch/watchdog/event_api.h"

namespace hangwatch::watchdog {

class DeviceTimers {
 public:
  static constexpr int kMaxDevices = 64;

  DeviceTimers(EventApi& api, size_t events_per_device) : api_(api), events_per_device_(events_per_device) {}

  // The timer of `device`, nullptr when none could be made.
  DeviceTimer* forDevice(int device) {
    if (__builtin_expect(device < 0 || device >= kMaxDevices, 0)) return nullptr;
    DeviceTimer* t = timers_[device].load(std::memory_order_acquire);
    if (__builtin_expect(t != nullptr, 1)) return t;
    if (failed_[device].load(std::memory_order_relaxed)) return nullptr;
    return create(device);
  }
  // The timer of `device` if it exists (the poller, for completed operations).
  DeviceTimer* find(int device) const {
    return device >= 0 && device < kMaxDevices ? timers_[device].load(std::memory_order_acquire) : nullptr;
  }
  // Makes the timer of `device` (with that device current for the creation).
  DeviceTimer* create(int device);
  void forEach(const std::function<void(DeviceTimer&)>& fn) const;
  // Poller thread, every pass: keeps each device's GPU clock fresh (GpuClock::kRecalibrateNs).
  void keepCalibrated(int64_t now_ns) const;
  // The device of the first timer made, -1 when none.
  int firstDevice() const { return first_device_.load(std::memory_order_relaxed); }
  uint64_t exhausted() const;

  // Reports a device whose events could not all be made (logged once by the caller).
  std::function<void(int device, const std::string& why)> on_fill_failure;
  // Called at every keepCalibrated for a device without a calibration stream.
  std::function<void(int device)> on_calibration_failure;
  // Runs once, right after the first timer's events were made.
  std::function<void()> on_first_timer;

 private:
  EventApi& api_;
  const size_t events_per_device_;
  std::mutex create_mutex_;
  std::unique_ptr<DeviceTimer> owned_[kMaxDevices];  // the process-wide watchdog is never destroyed
  std::atomic<DeviceTimer*> timers_[kMaxDevices] = {};
  std::atomic<bool> failed_[kMaxDevices] = {};  // no events could be made: not retried
  std::atomic<int> first_device_{-1};
};

}  // namespace hangwatch::watchdog
