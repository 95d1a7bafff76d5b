#include "train_loop.h"

#include <chrono>
#include <cstdio>

void runTrainingLoop(const TrainOptions& options, Bootstrap& boot, const std::function<void(int)>& step,
                     const std::string& shape, const std::string& ok_suffix) {
  const int rank = boot.rank();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < options.steps; ++s) {
    step(s);
    if ((s + 1) % options.log_every == 0 || s + 1 == options.steps) {
      std::printf("ring_train rank=%d step=%d done\n", rank, s);
      std::fflush(stdout);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  boot.barrier();
  if (rank == 0) {
    const double step_ms = options.steps > 0 ? seconds * 1000.0 / options.steps : 0.0;
    std::printf("ring_train summary ranks=%d steps=%d step_ms=%.2f grad_mb=%g %s\n", boot.size(), options.steps,
                step_ms, options.grad_mb, shape.c_str());
  }
  std::printf("ring_train rank=%d OK steps=%d%s%s\n", rank, options.steps, ok_suffix.c_str(),
              options.verify ? "" : " (results not verified)");
  std::fflush(stdout);
}
