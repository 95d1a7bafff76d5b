#pragma once
// One time base for everything the watchdog compares: CLOCK_MONOTONIC in ns, the
// clock CompletedOp documents and the one GPU times are mapped onto.
#include <time.h>

#include <cstdint>

namespace hangwatch::watchdog {

inline int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline double wallClockSeconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace hangwatch::watchdog
