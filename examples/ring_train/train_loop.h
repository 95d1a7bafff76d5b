#pragma once
// The step loop of both trainers: "rank=R step=S done" every --log-every steps, then a barrier,
// rank 0's summary line (with `shape`: the parallel layout, e.g. "tp=2") and each rank's OK line
// (`ok_suffix` after its step count). Tests and scripts read these lines.
#include <functional>
#include <string>

#include "bootstrap.h"
#include "train_options.h"

void runTrainingLoop(const TrainOptions& options, Bootstrap& boot, const std::function<void(int)>& step,
                     const std::string& shape, const std::string& ok_suffix = "");
