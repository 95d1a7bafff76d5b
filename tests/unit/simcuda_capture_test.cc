// Stream capture and CUDA graphs on simgpu, rule by rule as cuda_runtime_api.h (CUDA 13)
// words them: what may start or end a capture, what captured work does (nothing until
// the graph is launched, then at every launch), the three capture modes and the calls
// they forbid, and what invalidates a capture.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <thread>
#include <vector>

#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/simgpu/runtime.h"

namespace {

void addTo(float* p, float v) { *p += v; }
const void* addKernel() { return simgpu::kernel<&addTo>("addTo"); }

cudaError_t launchAdd(cudaStream_t s, float* p, float v) {
  void* args[] = {&p, &v};
  return cudaLaunchKernel(addKernel(), dim3(1), dim3(1), args, 0, s);
}

cudaStream_t newStream(unsigned flags = cudaStreamDefault) {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess);
  return s;
}

float* deviceFloats(size_t n) {
  float* p = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess);
  for (size_t i = 0; i < n; ++i) p[i] = 0;
  return p;
}

}  // namespace

TEST_CASE("CaptureMayNotStartOnTheLegacyStreamOrTwiceOnOneStream") {
  cudaStream_t s = newStream();
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamBeginCapture(s, static_cast<cudaStreamCaptureMode>(7)) == cudaErrorInvalidValue);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
  cudaGraph_t g = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorIllegalState);  // no capture any more
  cudaGetLastError();
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

TEST_CASE("CapturedWorkRunsOnlyWhenTheGraphIsLaunchedAndAtEveryLaunch") {
  cudaStream_t s = newStream();
  float* x = deviceFloats(4);
  cudaEvent_t done;
  REQUIRE(cudaEventCreate(&done) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(launchAdd(s, x, 1.0f) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(x + 1, 0, sizeof(float), s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(x + 2, x, sizeof(float), cudaMemcpyDeviceToDevice, s) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, s) == cudaSuccess);
  CHECK(cudaEventQuery(done) == cudaErrorCapturedEvent);  // last recorded in a capture
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(x[0] == 0.0f);  // nothing ran
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphUpload(exec, s) == cudaSuccess);
  for (int launch = 1; launch <= 3; ++launch) {
    x[1] = 7.0f;
    REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(done) == cudaSuccess);  // recorded by the launch: a node
    CHECK(x[0] == static_cast<float>(launch));
    CHECK(x[1] == 0.0f);
    CHECK(x[2] == static_cast<float>(launch));
  }
  CHECK(cudaEventQuery(done) == cudaSuccess);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("GlobalModeForbidsUnsafeCallsOnEveryThreadAndInvalidatesTheCapture") {
  cudaStream_t s = newStream();
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaError_t other_thread = cudaSuccess;
  std::thread([&] {
    void* p = nullptr;
    other_thread = cudaMalloc(&p, 64);
  }).join();
  CHECK(other_thread == cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  float* unused = nullptr;
  std::thread([&] {  // (the relaxed helper thread may allocate; this thread may not)
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaMalloc(reinterpret_cast<void**>(&unused), sizeof(float));
  }).join();
  CHECK(launchAdd(s, unused, 1.0f) == cudaErrorStreamCaptureInvalidated);
  cudaGraph_t g = reinterpret_cast<cudaGraph_t>(0x1);
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
  CHECK(g == nullptr);
  // A thread that relaxed its own mode may make unsafe calls beside a global capture.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  std::thread([&] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    void* p = nullptr;
    other_thread = cudaMalloc(&p, 64);
    cudaThreadExchangeStreamCaptureMode(&mode);
    CHECK(mode == cudaStreamCaptureModeRelaxed);
  }).join();
  CHECK(other_thread == cudaSuccess);
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  cudaGraphDestroy(g);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("ThreadLocalModeForbidsOnlyTheCapturingThreadAndRelaxedForbidsNoOne") {
  cudaStream_t s = newStream();
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t other_thread = cudaErrorUnknown;
  std::thread([&] {
    void* p = nullptr;
    other_thread = cudaMalloc(&p, 64);
  }).join();
  CHECK(other_thread == cudaSuccess);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported);  // the capturing thread itself
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaMalloc(&p, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  cudaGraphDestroy(g);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("EndCaptureBelongsToTheBeginningThreadUnlessRelaxed") {
  cudaStream_t s = newStream();
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t elsewhere = cudaSuccess;
  cudaGraph_t g = nullptr;
  std::thread([&] { elsewhere = cudaStreamEndCapture(s, &g); }).join();
  CHECK(elsewhere == cudaErrorStreamCaptureWrongThread);
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  cudaGraphDestroy(g);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  std::thread([&] { elsewhere = cudaStreamEndCapture(s, &g); }).join();
  CHECK(elsewhere == cudaSuccess);
  cudaGraphDestroy(g);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST_CASE("ForkedStreamsJoinTheCaptureAndMustBeJoinedBack") {
  cudaStream_t origin = newStream(), side = newStream();
  float* x = deviceFloats(2);
  cudaEvent_t fork_point, join_point;
  REQUIRE(cudaEventCreate(&fork_point) == cudaSuccess);
  REQUIRE(cudaEventCreate(&join_point) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork_point, origin) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork_point, 0) == cudaSuccess);  // side joins the capture
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(launchAdd(side, x + 1, 5.0f) == cudaSuccess);
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamEndCapture(side, &g) == cudaErrorStreamCaptureUnmatched);  // not where it began
  REQUIRE(cudaEventRecord(join_point, side) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(origin, join_point, 0) == cudaSuccess);  // joined back
  REQUIRE(cudaStreamEndCapture(origin, &g) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  cudaGraphExec_t exec;
  REQUIRE(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, origin) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(origin) == cudaSuccess);
  CHECK(x[1] == 5.0f);
  // A fork never joined back: the graph is refused.
  REQUIRE(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork_point, origin) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork_point, 0) == cudaSuccess);
  CHECK(cudaStreamEndCapture(origin, &g) == cudaErrorStreamCaptureUnjoined);
  cudaGetLastError();
}

TEST_CASE("WaitingOnWorkOutsideTheCaptureOrOnTheCapturingStreamInvalidatesIt") {
  cudaStream_t s = newStream(), other = newStream();
  cudaEvent_t outside;
  REQUIRE(cudaEventCreate(&outside) == cudaSuccess);
  REQUIRE(cudaEventRecord(outside, other) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s, outside, 0) == cudaErrorStreamCaptureIsolation);
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s, outside, cudaEventWaitExternal) == cudaSuccess);  // an external wait node
  CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
}

TEST_CASE("TheLegacyStreamBesideACapturingBlockingStreamIsAnImplicitDependency") {
  cudaStream_t blocking = newStream(cudaStreamDefault);
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  cudaStreamCaptureStatus status{};
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaErrorStreamCaptureImplicit);
  REQUIRE(cudaStreamIsCapturing(blocking, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);  // asking does not invalidate it
  CHECK(launchAdd(nullptr, deviceFloats(1), 1.0f) == cudaErrorStreamCaptureImplicit);  // using it does
  REQUIRE(cudaStreamIsCapturing(blocking, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamEndCapture(blocking, &g) == cudaErrorStreamCaptureInvalidated);
  // A non-blocking stream's capture leaves the legacy stream alone.
  cudaStream_t nonblocking = newStream(cudaStreamNonBlocking);
  REQUIRE(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(launchAdd(nullptr, deviceFloats(1), 1.0f) == cudaSuccess);
  REQUIRE(cudaStreamEndCapture(nonblocking, &g) == cudaSuccess);
  cudaGetLastError();
}

TEST_CASE("EachCaptureSequenceHasItsOwnIdAndAGraphLaunchedInACaptureIsOneNode") {
  cudaStream_t s = newStream();
  float* x = deviceFloats(1);
  unsigned long long first = 0, second = 0;
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaStreamGetCaptureInfo(s, &status, &first, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  REQUIRE(launchAdd(s, x, 1.0f) == cudaSuccess);
  cudaGraph_t inner = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &inner) == cudaSuccess);
  cudaGraphExec_t inner_exec;
  REQUIRE(cudaGraphInstantiate(&inner_exec, inner, 0) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaStreamGetCaptureInfo(s, &status, &second, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  CHECK(second != first);
  REQUIRE(cudaGraphLaunch(inner_exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(inner_exec, s) == cudaSuccess);
  cudaGraph_t outer = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &outer) == cudaSuccess);
  cudaGraphExec_t outer_exec;
  REQUIRE(cudaGraphInstantiate(&outer_exec, outer, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(outer_exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(x[0] == 2.0f);
}
