#pragma once
// What libsimcuda exports to the other sim libraries (libsimcublas, libsimnccl):
// running device work in stream order and the emulated device's speed. Not part
// of any CUDA API; real-GPU builds never see this header.
#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>

namespace simgpu {

using DeviceWork = std::function<void()>;

// Queues `work` on `stream` like a kernel launch: it runs on the stream's worker
// thread after everything queued before it (legacy default-stream rules included).
// `name` is the kernel name a tool would see. Returns cudaErrorInvalidResourceHandle
// for a stream that does not exist.
cudaError_t enqueue(cudaStream_t stream, const char* name, DeviceWork work);

// Stream capture (cudaStreamBeginCapture): whether `stream` is capturing, and a node
// for its capture's graph that runs `issue` with the launch stream at every launch of
// the instantiated graph (how simnccl captures a collective: each launch is a new
// execution with its own sequence number). cudaErrorIllegalState when not capturing.
bool isCapturing(cudaStream_t stream);
cudaError_t captureNode(cudaStream_t stream, const char* name, std::function<cudaError_t(cudaStream_t)> issue);

// The calling thread's current device (cudaSetDevice), 0 by default.
int currentDevice();

// Launcher rank of this process if known, else the current device ordinal: the
// rank that slow-rank faults are matched against for GEMMs and copies.
int processRank();

// Fraction of normal speed of this process's device (slow-rank faults), 1.0 when healthy.
double deviceSpeed();

// Charges the running device work `modeled`, or the CPU time its thread has spent on
// it so far if longer, divided by deviceSpeed(), on the device's modeled clock
// (cuda/device_clock.h), and returns once the wall clock has reached the work's modeled
// end: how emulated work takes its modeled time, and how a slow-rank fault stretches
// all of it, at any size and however loaded the host's CPUs are.
void occupyDevice(std::chrono::nanoseconds modeled);
// The same for device work that may wait on something (a kernel's host body): charges
// the wall time since `start`, divided by deviceSpeed().
void occupyDeviceSince(std::chrono::steady_clock::time_point start);

// The driver API's view of the runtime, for simgpu's libcuda.so.1 (cuda/driver_api.cc):
// whether the runtime has made `device`'s primary context (Runtime::noteContextUse), and
// the runtime's own driver entry points (cuLaunchKernel[Ex][_ptsz], cuFuncGetName,
// cuKernelGetName; nullptr for any other name), which launch through the runtime's streams.
bool primaryContextActive(int device);
void* runtimeDriverEntry(const char* name, bool per_thread);

// Name of the device work the calling stream thread is running (a kernel's
// registered name, "simgpu_memcpy", ...), or nullptr between tasks and off streams.
const char* runningKernelName();

}  // namespace simgpu
