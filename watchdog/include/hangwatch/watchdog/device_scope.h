#pragma once
// Makes `device` current on the calling thread for the scope and restores the
// previous one, as NCCL itself does around its launches (group.cc): the watchdog
// records an event on stream 0 of an NCCL communicator's device this way when the
// user's thread has another device current. -1: leaves the device alone.
#include <cuda_runtime_api.h>

#include "hangwatch/watchdog/last_error_guard.h"
#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (device < 0) return;
    RealApi& api = RealApi::instance();
    auto get = api.getDevice.get();
    auto set = api.setDevice.get();
    if (get == nullptr || set == nullptr || get(&saved_) != cudaSuccess || saved_ == device) {
      saved_ = -1;
      return;
    }
    if (set(device) != cudaSuccess) saved_ = -1;
  }
  ~DeviceScope() {
    if (saved_ < 0) return;
    if (auto set = RealApi::instance().setDevice.get()) set(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  LastErrorGuard keep_;
  int saved_ = -1;
};

}  // namespace hangwatch::watchdog
