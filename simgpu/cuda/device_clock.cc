#include "hangwatch/simgpu/cuda/device_clock.h"

#include <time.h>

#include <algorithm>
#include <optional>
#include <thread>

namespace simgpu::device_clock {
namespace {

struct RunningTask {
  bool active = false;
  Clock::time_point start;
  std::optional<Clock::time_point> charged_until;  // set once occupy() or instant() ran
  std::chrono::nanoseconds cpu_mark{0};            // thread CPU time at start or last charge
};

thread_local RunningTask t_task;

// The thread's CPU time, which a loaded machine does not stretch as it does wall time.
std::chrono::nanoseconds threadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

void waitUntil(Clock::time_point deadline) {
  using namespace std::chrono;
  // Sleep most of the way; spin the last stretch so short copies keep their modeled time.
  constexpr auto kSpin = microseconds(200);
  if (deadline - Clock::now() > kSpin) std::this_thread::sleep_until(deadline - kSpin);
  while (Clock::now() < deadline) std::this_thread::yield();
}

}  // namespace

void beginTask(Clock::time_point model_start) {
  t_task = RunningTask{true, model_start, std::nullopt, threadCpu()};
}

Clock::time_point endTask() {
  RunningTask task = t_task;
  t_task = RunningTask{};
  if (task.charged_until) return *task.charged_until;
  return std::max(task.start, Clock::now());
}

namespace {

std::chrono::nanoseconds scaled(std::chrono::nanoseconds healthy, double speed) {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(duration<double, std::nano>(static_cast<double>(healthy.count()) / speed));
}

void charge(std::chrono::nanoseconds device_time) {
  const Clock::time_point end = t_task.charged_until.value_or(t_task.start) + device_time;
  t_task.charged_until = end;
  waitUntil(end);
  t_task.cpu_mark = threadCpu();
}

}  // namespace

void occupy(std::chrono::nanoseconds modeled, double speed) {
  if (!t_task.active) {  // off a stream worker: just take the time
    waitUntil(Clock::now() + scaled(modeled, speed));
    return;
  }
  charge(scaled(std::max(threadCpu() - t_task.cpu_mark, modeled), speed));
}

void occupyElapsed(std::chrono::nanoseconds elapsed, double speed) {
  if (!t_task.active) {
    waitUntil(Clock::now() + scaled(elapsed, speed) - elapsed);
    return;
  }
  charge(scaled(elapsed, speed));
}

Clock::time_point instant() {
  if (!t_task.active) return Clock::now();
  if (!t_task.charged_until) t_task.charged_until = t_task.start;
  return *t_task.charged_until;
}

}  // namespace simgpu::device_clock
