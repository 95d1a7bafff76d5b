#pragma once
// What a rank does after its snapshot is written, on a dedicated thread so that
// neither the poller nor the training threads wait for it: run the collector
// (bounded), then apply HANGWATCH_ON_HANG.
#include <functional>

#include "collector_launcher.h"
#include "watchdog_config.h"

namespace hangwatch::watchdog {

struct HangResponse {
  bool collect = false;
  CollectorRequest collector;
  OnHang on_hang = OnHang::kWait;
};

class HangResponder {
 public:
  static constexpr int kAbortExitCode = 3;

  // `abort_comms` aborts every live communicator; `exit_process` ends the process
  // (tests replace both). Both run only for OnHang::kAbort.
  HangResponder(std::function<void()> abort_comms, std::function<void(int)> exit_process);

  // At most once; later calls are ignored. The thread is detached and owns copies of
  // everything it uses: nothing waits for it, and it outlives this object if need be.
  void start(const HangResponse& response);

 private:
  static void respond(HangResponse response, std::function<void()> abort_comms,
                      std::function<void(int)> exit_process);

  std::function<void()> abort_comms_;
  std::function<void(int)> exit_process_;
  bool started_ = false;
};

}  // namespace hangwatch::watchdog
