#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "simcuda_test_support.h"
#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/simgpu/runtime.h"

using simgpu_test::msSince;

namespace {

struct OrderLog {
  std::mutex mutex;
  std::vector<int> values;
};

void appendValue(OrderLog* log, int value) {
  std::lock_guard lock(log->mutex);
  log->values.push_back(value);
}

void sleepThenSet(int ms, std::atomic<bool>* done) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  done->store(true);
}

void observe(std::atomic<bool>* flag, std::atomic<int>* seen) { seen->store(flag->load() ? 1 : 0); }

const void* appendKernel() { return simgpu::kernel<&appendValue>("appendValue"); }
const void* sleepKernel() { return simgpu::kernel<&sleepThenSet>("sleepThenSet"); }
const void* observeKernel() { return simgpu::kernel<&observe>("observe"); }

cudaError_t launchSleep(cudaStream_t s, int ms, std::atomic<bool>* done) {
  void* args[] = {&ms, &done};
  return cudaLaunchKernel(sleepKernel(), dim3(1), dim3(1), args, 0, s);
}

cudaError_t launchObserve(cudaStream_t s, std::atomic<bool>* flag, std::atomic<int>* seen) {
  void* args[] = {&flag, &seen};
  return cudaLaunchKernel(observeKernel(), dim3(1), dim3(1), args, 0, s);
}

}  // namespace

TEST_CASE("TasksRunInQueueOrderOnOneStream") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  OrderLog log;
  OrderLog* logp = &log;
  for (int i = 0; i < 100; ++i) {
    void* args[] = {&logp, &i};
    REQUIRE(cudaLaunchKernel(appendKernel(), dim3(1), dim3(1), args, 0, s) == cudaSuccess);
  }
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  CHECK(log.values == expected);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("LegacyDefaultStreamWaitsForBlockingStreams") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  std::atomic<bool> done{false};
  std::atomic<int> seen{-1};
  REQUIRE(launchSleep(s, 100, &done) == cudaSuccess);
  REQUIRE(launchObserve(0, &done, &seen) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(0) == cudaSuccess);
  CHECK(seen.load() == 1);
  cudaStreamDestroy(s);
}

TEST_CASE("BlockingStreamWaitsForLegacyDefaultStream") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  std::atomic<bool> done{false};
  std::atomic<int> seen{-1};
  REQUIRE(launchSleep(cudaStreamLegacy, 100, &done) == cudaSuccess);
  REQUIRE(launchObserve(s, &done, &seen) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(seen.load() == 1);
  cudaStreamDestroy(s);
}

TEST_CASE("PerThreadStreamSynchronizesWithLegacyLikeABlockingStream") {
  std::atomic<bool> done{false};
  std::atomic<int> seen{-1};
  REQUIRE(launchSleep(0, 100, &done) == cudaSuccess);
  REQUIRE(launchObserve(cudaStreamPerThread, &done, &seen) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess);
  CHECK(seen.load() == 1);
}

TEST_CASE("NonBlockingStreamDoesNotWaitForLegacyDefaultStream") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  unsigned flags = 0;
  REQUIRE(cudaStreamGetFlags(s, &flags) == cudaSuccess);
  CHECK(flags == cudaStreamNonBlocking);
  std::atomic<bool> done{false};
  std::atomic<int> seen{-1};
  REQUIRE(launchSleep(0, 300, &done) == cudaSuccess);
  REQUIRE(launchObserve(s, &done, &seen) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(seen.load() == 0);
  CHECK(cudaStreamQuery(0) == cudaErrorNotReady);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(done.load());
  cudaStreamDestroy(s);
}

TEST_CASE("StreamQueryIsNotReadyWhileWorkIsPending") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  std::atomic<bool> done{false};
  REQUIRE(launchSleep(s, 100, &done) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaSuccess);  // not-ready is a status, not an error
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  cudaStreamDestroy(s);
}

TEST_CASE("EventQueryIsNotReadyUntilStreamReachesIt") {
  cudaStream_t s;
  cudaEvent_t e;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaSuccess);  // never recorded
  std::atomic<bool> done{false};
  REQUIRE(launchSleep(s, 150, &done) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(done.load());
  CHECK(cudaEventQuery(e) == cudaSuccess);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

TEST_CASE("EventElapsedTimeMeasuresWorkBetweenRecords") {
  cudaStream_t s;
  cudaEvent_t start, stop;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  std::atomic<bool> done{false};
  REQUIRE(cudaEventRecord(start, s) == cudaSuccess);
  REQUIRE(launchSleep(s, 120, &done) == cudaSuccess);
  REQUIRE(cudaEventRecord(stop, s) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaErrorNotReady);
  REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms == Approx(120).epsilon(0.35));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(s);
}

TEST_CASE("ElapsedTimeRejectsUntimedAndUnrecordedEvents") {
  cudaEvent_t timed, untimed, never;
  REQUIRE(cudaEventCreate(&timed) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&never, cudaEventBlockingSync) == cudaSuccess);
  REQUIRE(cudaEventRecord(timed, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, 0) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, timed, untimed) == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventElapsedTime(&ms, timed, never) == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventElapsedTime(nullptr, timed, timed) == cudaErrorInvalidValue);
  REQUIRE(cudaEventElapsedTime(&ms, timed, timed) == cudaSuccess);
  CHECK(ms == 0.0f);
  cudaGetLastError();
}

TEST_CASE("ReRecordingAnEventReplacesThePreviousRecord") {
  cudaStream_t s;
  cudaEvent_t e;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaSuccess);
  std::atomic<bool> done{false};
  REQUIRE(launchSleep(s, 150, &done) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(done.load());
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

TEST_CASE("StreamWaitEventOrdersWorkAcrossStreams") {
  cudaStream_t producer, consumer;
  cudaEvent_t ready;
  REQUIRE(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) == cudaSuccess);
  std::atomic<bool> done{false};
  std::atomic<int> seen{-1};
  REQUIRE(launchSleep(producer, 120, &done) == cudaSuccess);
  REQUIRE(cudaEventRecord(ready, producer) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(consumer, ready, 0) == cudaSuccess);
  // A later re-record must not affect the wait already queued.
  REQUIRE(cudaEventRecord(ready, consumer) == cudaSuccess);
  REQUIRE(launchObserve(consumer, &done, &seen) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(seen.load() == 1);
  cudaEventDestroy(ready);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

TEST_CASE("DestroyingAStreamLetsQueuedWorkFinish") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  std::atomic<bool> done{false};
  REQUIRE(launchSleep(s, 50, &done) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  auto start = std::chrono::steady_clock::now();
  while (!done.load() && msSince(start) < 2000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(done.load());
}

namespace {
void waitForFlag(std::atomic<bool>* release) {
  while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
const void* waitKernel() { return simgpu::kernel<&waitForFlag>("waitForFlag"); }
}  // namespace

// A GPU's launch queue is finite: behind a kernel that does not finish, a host that keeps
// launching blocks inside the launch once the queue is full (SIMGPU_LAUNCH_QUEUE_DEPTH,
// 1024 by default), and goes on when the stream moves again. Other streams are not held up.
TEST_CASE("ALaunchOntoAFullStreamWaitsUntilTheStreamMoves") {
  cudaStream_t s, other;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
  std::atomic<bool> release{false};
  std::atomic<bool>* releasep = &release;
  void* wait_args[] = {&releasep};
  REQUIRE(cudaLaunchKernel(waitKernel(), dim3(1), dim3(1), wait_args, 0, s) == cudaSuccess);
  std::atomic<int> launched{0};
  // Outlive the host thread: the kernels it queued read them after it has returned.
  std::atomic<bool> flag{true};
  std::atomic<int> seen{0};
  std::thread host([&] {
    for (int i = 0; i < 1100; ++i) {
      if (launchObserve(s, &flag, &seen) != cudaSuccess) return;
      launched.fetch_add(1);
    }
  });
  auto start = std::chrono::steady_clock::now();
  int last = -1;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (launched.load() == last) break;  // stopped moving
    last = launched.load();
  }
  CHECK(launched.load() >= 1000);
  CHECK(launched.load() < 1100);
  // Another stream of the same device takes work meanwhile.
  std::atomic<bool> done{false};
  REQUIRE(launchSleep(other, 1, &done) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(other) == cudaSuccess);
  CHECK(done.load());
  release.store(true);
  host.join();
  CHECK(launched.load() == 1100);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
}
