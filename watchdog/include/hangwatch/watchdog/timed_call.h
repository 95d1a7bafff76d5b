#pragma once
// The one way an interposer times a call on a stream: events around it, the call's
// errno and return code untouched, the record completed by `fill` when the call
// succeeded, and (on a capturing stream, where nothing is recorded) `captured` told the
// capture sequence the call went into.
#include <cerrno>
#include <cstdint>

#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/watchdog.h"

namespace hangwatch::watchdog {

struct NoCapture {
  void operator()(uint64_t) const {}
};

template <typename Rc, typename Call, typename Fill, typename Captured = NoCapture>
Rc timedCall(Watchdog* w, cudaStream_t stream, Rc success, Call&& call, Fill&& fill, Captured&& captured = {}) {
  Watchdog::Timing t;
  const int64_t issued = monotonicNs();
  const int entry_errno = errno;
  const bool timing = w->beginTiming(stream, &t);
  errno = entry_errno;  // the call sees errno as the caller left it
  Rc rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  if (!timing) {
    if (rc == success && t.capture_id != 0) captured(t.capture_id);
  } else if (rc == success) {
    PendingOp op;
    op.op.host_issue_ns = issued;
    fill(op);
    w->endTiming(t, stream, op);
  } else {
    w->abandonTiming(t);
  }
  errno = saved;
  return rc;
}

}  // namespace hangwatch::watchdog
