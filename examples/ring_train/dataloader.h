#pragma once
// The host input pipeline of a training job: a producer thread ("dataloader")
// prepares batches into a bounded queue that the training loop drains, the shape
// in which dataloader deadlocks and slow input show up in real jobs.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

struct Batch {
  int step = 0;
  std::vector<std::byte> bytes;  // batch x hidden inputs in the GEMM dtype
};

struct DataloaderPlan {
  int steps = 0;
  size_t elements = 0;           // per batch
  bool half_precision = false;
  int host_ms_per_batch = 0;     // decode work per batch
  int deadlock_at_step = -1;     // the batch whose shard read never returns, -1 for none
  size_t queue_capacity = 2;
};

class Dataloader {
 public:
  explicit Dataloader(DataloaderPlan plan);
  ~Dataloader();
  Dataloader(const Dataloader&) = delete;
  Dataloader& operator=(const Dataloader&) = delete;

  // Blocks until the next batch is ready, as a training loop waits on its input queue.
  Batch next();

 private:
  void produce();
  Batch prepare(int step) const;

  DataloaderPlan plan_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::thread producer_;
};
