// ring_train: a training-shaped multi-rank program (one process per rank) used to
// reproduce hangs and slowdowns; MPI bootstraps, NCCL carries the traffic.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>

#include "gpu_check.h"
#include "train_options.h"
#include "trainer.h"

namespace {

// Settings that only make sense once the world size is known.
void checkAgainstWorld(const TrainOptions& o, int world_size) {
  const auto inWorld = [&](const std::optional<int>& r, const char* flag) {
    if (r && *r >= world_size)
      throw UsageError(std::string(flag) + " " + std::to_string(*r) + " is not a rank of this " +
                       std::to_string(world_size) + "-rank job");
  };
  inWorld(o.stall_rank, "--stall-rank");
  inWorld(o.mismatch_rank, "--mismatch-rank");
  inWorld(o.sync_rank, "--sync-rank");
  inWorld(o.gc_rank, "--gc-rank");
  inWorld(o.slow_dataloader_rank, "--slow-dataloader-rank");
  if (world_size % o.tp != 0)
    throw UsageError("--tp " + std::to_string(o.tp) + " does not divide the world size " +
                     std::to_string(world_size));
}

}  // namespace

int main(int argc, char** argv) {
  TrainOptions options;
  try {
    options = parseTrainOptions(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ring_train: %s\n%s", e.what(), trainUsage().c_str());
    return 2;
  }
  if (options.help) {
    std::printf("%s", trainUsage().c_str());
    return 0;
  }

  MPI_Init(&argc, &argv);
  int rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CheckIdentity::program = "ring_train";
  CheckIdentity::rank = rank;
  try {
    checkAgainstWorld(options, world_size);
  } catch (const UsageError& e) {
    if (rank == 0) std::fprintf(stderr, "ring_train: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }

  std::printf("ring_train rank=%d pid=%d\n", rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  {
    Trainer trainer(options, rank, world_size);
    trainer.run();
  }
  MPI_Finalize();
  return 0;
}
