#include "dataloader.h"

#include <pthread.h>

#include <chrono>

// A shard read that waits for a storage reply that never comes: the producer blocks
// here forever while the training loop starves on the queue.
extern "C" __attribute__((noinline)) void load_shard_blocking(int step) {
  std::mutex storage;
  std::condition_variable reply;
  bool replied = false;
  std::unique_lock lock(storage);
  reply.wait(lock, [&] { return replied; });
  asm volatile("" ::"r"(step));
}

Dataloader::Dataloader(DataloaderPlan plan) : plan_(plan), producer_([this] { produce(); }) {}

Dataloader::~Dataloader() {
  if (producer_.joinable()) producer_.join();
}

Batch Dataloader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty(); });
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  changed_.notify_all();
  return batch;
}

void Dataloader::produce() {
  pthread_setname_np(pthread_self(), "dataloader");
  for (int step = 0; step < plan_.steps; ++step) {
    if (step == plan_.deadlock_at_step) load_shard_blocking(step);
    Batch batch = prepare(step);
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ready_.size() < plan_.queue_capacity; });
    ready_.push_back(std::move(batch));
    changed_.notify_all();
  }
}

Batch Dataloader::prepare(int step) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(plan_.host_ms_per_batch);
  Batch batch;
  batch.step = step;
  batch.bytes.resize(plan_.elements * (plan_.half_precision ? 2 : 4));
  for (size_t i = 0; i < plan_.elements; ++i) {
    const float value = static_cast<float>((i * 31 + static_cast<size_t>(step) * 17) % 101) / 101.0f;
    if (plan_.half_precision)
      reinterpret_cast<_Float16*>(batch.bytes.data())[i] = static_cast<_Float16>(value);
    else
      reinterpret_cast<float*>(batch.bytes.data())[i] = value;
  }
  std::this_thread::sleep_until(deadline);
  return batch;
}
