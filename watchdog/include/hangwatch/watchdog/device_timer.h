#pragma once
// Timing resources of one CUDA device. Events belong to the device they were made on
// and can be recorded only on that device's streams, and cudaEventElapsedTime compares
// events of one device, so each device has its own event pool and its own GPU clock
// reference (recorded on a calibration stream of that device).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "hangwatch/watchdog/event_api.h"
#include "hangwatch/watchdog/event_pool.h"
#include "hangwatch/watchdog/gpu_clock.h"

namespace hangwatch::watchdog {

class DeviceTimer {
 public:
  DeviceTimer(EventApi& api, int device, size_t events) : device_(device), pool_(api, events), clock_(api) {}

  int device() const { return device_; }
  EventPool& pool() { return pool_; }
  GpuClock& clock() { return clock_; }

  // Poller thread: keeps the clock's reference event fresh (re-recorded every
  // `recalibrate_ns`); the calibration stream is made on first use, on this device.
  void keepCalibrated(int64_t now_ns, int64_t recalibrate_ns);
  // Poller thread: the calibration stream could not be made; GPU times are placed approximately.
  bool calibrationFailed() const { return calibration_failed_; }

 private:
  const int device_;
  EventPool pool_;
  GpuClock clock_;
  cudaStream_t calibration_stream_ = nullptr;
  bool calibration_failed_ = false;
  cudaEvent_t spare_ref_ = nullptr;
};

}  // namespace hangwatch::watchdog
