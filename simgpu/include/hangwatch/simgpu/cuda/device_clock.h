#pragma once
// The emulated GPU's clock (issue #25): what events read, separate from the host's.
//
// A stream's work is timed on a modeled clock, not by when its worker thread got a CPU.
// A task starts at max(the end of the stream's previous task, the host's submit time,
// the model time of the streams it waits on) and lasts its modeled duration (a GEMM's
// FLOPs at the device's TFLOPS, or the CPU time the emulation computed it in, never
// the wall time a loaded CPU stretched that into), divided by a slow-rank fault's
// speed. So event timings keep a slow GPU at its fraction however many processes
// share the cores. Work whose time is real synchronization between processes (a
// collective, a host function) ends at the wall clock: those re-align each device's
// clock with the others'. The model never runs ahead of the wall clock: a task whose
// modeled end is still to come is slept until then, so the host never sees a GPU
// finish before its own time says it did. Hang detection reads completion (wall
// time), not these stamps.
#include <chrono>

namespace simgpu::device_clock {

using Clock = std::chrono::steady_clock;

// Called by a stream's worker around each task.
void beginTask(Clock::time_point model_start);
// The task's modeled end: its start plus what occupy() charged, its start for an
// instant, otherwise max(start, wall now).
Clock::time_point endTask();

// Charges `modeled` (or the CPU time the calling thread spent on the task since it
// began or last charged, whichever is longer) divided by `speed` to the running task,
// then waits until the wall clock has reached the task's modeled end.
void occupy(std::chrono::nanoseconds modeled, double speed);
// Charges the wall time `elapsed` divided by `speed`: for work that may wait on
// something (a kernel's host body spinning on a flag), whose CPU time says nothing.
void occupyElapsed(std::chrono::nanoseconds elapsed, double speed);
// The running task takes no device time (an event record); returns its device time.
Clock::time_point instant();

}  // namespace simgpu::device_clock
