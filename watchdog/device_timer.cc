#include "hangwatch/watchdog/device_timer.h"

#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

void DeviceTimer::keepCalibrated(int64_t now_ns, int64_t recalibrate_ns) {
  if (calibration_failed_) return;
  if (calibration_stream_ == nullptr) {
    RealApi& api = RealApi::instance();
    auto set_device = api.setDevice.get();
    auto create = api.streamCreateWithFlags.get();
    if (set_device == nullptr || set_device(device_) != cudaSuccess || create == nullptr ||
        create(&calibration_stream_, cudaStreamNonBlocking) != cudaSuccess) {
      calibration_stream_ = nullptr;
      calibration_failed_ = true;
      return;
    }
  }
  if (cudaEvent_t old = clock_.poll()) spare_ref_ = old;
  if (clock_.calibrating() || (clock_.ready() && now_ns - clock_.calibratedAtNs() <= recalibrate_ns)) return;
  cudaEvent_t ref = spare_ref_;
  if (ref == nullptr && !pool_.acquire(&ref)) return;
  spare_ref_ = nullptr;
  clock_.calibrate(ref, calibration_stream_, monotonicNs());  // as close to the record as can be
  if (!clock_.calibrating()) spare_ref_ = ref;
}

}  // namespace hangwatch::watchdog
