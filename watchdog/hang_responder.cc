#include "hang_responder.h"

#include <pthread.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "watchdog_log.h"

namespace hangwatch::watchdog {

HangResponder::HangResponder(std::function<void()> abort_comms, std::function<void(int)> exit_process)
    : abort_comms_(std::move(abort_comms)), exit_process_(std::move(exit_process)) {}

void HangResponder::start(const HangResponse& response) {
  if (started_) return;
  started_ = true;
  std::thread(&HangResponder::respond, response, abort_comms_, exit_process_).detach();
}

void HangResponder::respond(HangResponse response, std::function<void()> abort_comms,
                            std::function<void(int)> exit_process) {
  pthread_setname_np(pthread_self(), "hangwatch-dump");
  WatchdogLog& log = WatchdogLog::instance();
  if (response.collect) {
    CollectorLauncher launcher;
    Expected<CollectorOutcome> outcome = Error{"not started"};
    try {
      outcome = launcher.run(response.collector);
    } catch (const std::exception& e) {
      outcome = Error{e.what()};
    }
    if (!outcome)
      log.failureOnce("collector-start", "collector not run: " + outcome.error());
    else if (!outcome->finished)
      log.info("collector still running after " + std::to_string(static_cast<int>(response.collector.wait_s)) +
               " s; not waiting any longer (log: " + response.collector.log_path + ")");
    else if (outcome->exit_code != 0)
      log.failureOnce("collector-exit", "collector exited with " + std::to_string(outcome->exit_code) +
                                            " (log: " + response.collector.log_path + ")");
  }
  if (response.on_hang != OnHang::kAbort) return;
  log.info("HANGWATCH_ON_HANG=abort: aborting communicators and exiting");
  // ncclCommAbort may itself get stuck on a broken device; give it a bounded time.
  auto aborted = std::make_shared<std::promise<void>>();
  std::thread([fn = abort_comms, aborted] {
    if (fn) fn();
    aborted->set_value();
  }).detach();
  aborted->get_future().wait_for(std::chrono::seconds(10));
  if (exit_process) exit_process(kAbortExitCode);
}

}  // namespace hangwatch::watchdog
