#include "host_stalls.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <thread>

#include <unistd.h>

extern "C" __attribute__((noinline)) void stall_in_host_loop(int step) {
  volatile uint64_t spins = 0;
  (void)step;
  for (;;) spins = spins + 1;
}

extern "C" __attribute__((noinline)) void stall_in_sleep(int step) {
  (void)step;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

extern "C" __attribute__((noinline)) void gc_pause(int ms) {
  // Busy, not sleeping: a collector pause keeps the host thread on the CPU.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  volatile uint64_t marked = 0;
  while (std::chrono::steady_clock::now() < until) marked = marked + 1;
}

extern "C" __attribute__((noinline)) void exit_mid_collective(int step, int how) {
  std::fprintf(stderr, "ring_train: exiting mid-collective at step %d\n", step);
  std::fflush(stderr);
  if (how == 0) std::raise(SIGKILL);
  if (how == 1) std::abort();
  std::exit(1);
}

extern "C" __attribute__((noinline)) void freeze_mid_collective(int step) {
  std::fprintf(stderr, "ring_train: freezing (SIGSTOP) mid-collective at step %d\n", step);
  std::fflush(stderr);
  kill(getpid(), SIGSTOP);
}
