#include "hangwatch/watchdog/declared_hang.h"

#include <time.h>

#include "hangwatch/watchdog/monotonic_clock.h"  // monotonicNs: clock_gettime, async-signal-safe

namespace hangwatch::watchdog {
namespace {

void pause10ms() {
  timespec ts{0, 10'000'000};
  nanosleep(&ts, nullptr);  // async-signal-safe
}

thread_local bool own_thread __attribute__((tls_model("initial-exec"))) = false;

}  // namespace

void DeclaredHang::markOwnThread() noexcept { own_thread = true; }
bool DeclaredHang::onOwnThread() noexcept { return own_thread; }

DeclaredHang::Outcome DeclaredHang::declareAndHold(How how, uintptr_t comm, int64_t hold_ns) noexcept {
  const int64_t deadline = monotonicNs() + hold_ns;
  const uint32_t declined_before = declined_.load(std::memory_order_acquire);
  if (!dumping_.load(std::memory_order_acquire)) {
    comm_.store(comm, std::memory_order_release);  // a second declaration meanwhile: the last one's
    int none = static_cast<int>(How::kNone);
    how_.compare_exchange_strong(none, static_cast<int>(how), std::memory_order_acq_rel);
  }
  while (monotonicNs() < deadline) {
    if (done_.load(std::memory_order_acquire)) return Outcome::kDumped;
    if (!dumping_.load(std::memory_order_acquire) && declined_.load(std::memory_order_acquire) != declined_before)
      return Outcome::kNothingPending;
    pause10ms();
  }
  return done_.load(std::memory_order_acquire) ? Outcome::kDumped : Outcome::kHeldTooLong;
}

void DeclaredHang::decline() noexcept {
  how_.store(static_cast<int>(How::kNone), std::memory_order_release);
  declined_.fetch_add(1, std::memory_order_acq_rel);
}

const char* DeclaredHang::reason(How how) {
  switch (how) {
    case How::kCommAbort: return "framework-abort";
    case How::kAbortSignal: return "framework-signal";
    case How::kNone: break;
  }
  return "";
}

}  // namespace hangwatch::watchdog
