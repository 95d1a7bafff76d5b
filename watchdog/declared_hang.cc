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

// Appends to a fixed buffer, cutting short at its end: safe in a signal handler.
struct LineBuffer {
  char* buf;
  size_t cap;
  size_t len = 0;
  void add(const char* text) noexcept {
    while (*text != '\0' && len < cap) buf[len++] = *text++;
  }
  void add(int64_t n) noexcept {
    char digits[24];
    int k = 0;
    const bool negative = n < 0;
    uint64_t u = negative ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    do {
      digits[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative && len < cap) buf[len++] = '-';
    while (k > 0 && len < cap) buf[len++] = digits[--k];
  }
};

}  // namespace

size_t DeclaredHang::holdLine(char* buf, size_t cap, int rank, How how, Outcome outcome, int64_t held_ns) noexcept {
  LineBuffer line{buf, cap};
  line.add("hangwatch[rank ");
  if (rank >= 0)
    line.add(static_cast<int64_t>(rank));
  else
    line.add("?");
  line.add("]: ");
  line.add(how == How::kCommAbort ? "ncclCommAbort" : "SIGABRT");
  line.add(" held ");
  line.add(held_ns / 1'000'000);
  line.add(outcome == Outcome::kDumped ? " ms until this rank's dumps were done\n"
                                       : " ms, its bound, and went on with this rank's dumps not done\n");
  return line.len;
}

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
