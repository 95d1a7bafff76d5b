// ring_train: a training-shaped multi-rank program (one process per rank) used to
// reproduce hangs and slowdowns; MPI or env:// (torchrun, Slurm) bootstraps, NCCL carries
// the traffic.
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "gpu_check.h"
#include "train_options.h"
#include "pipeline_trainer.h"
#include "trainer.h"

namespace {

// Settings that only make sense once the world size is known.
void checkAgainstWorld(const TrainOptions& o, int world_size) {
  const auto inWorld = [&](const std::optional<int>& r, const char* flag) {
    if (r && *r >= world_size)
      throw UsageError(fmt::format("{} {} is not a rank of this {}-rank job", flag, *r, world_size));
  };
  inWorld(o.stall_rank, "--stall-rank");
  inWorld(o.mismatch_rank, "--mismatch-rank");
  inWorld(o.exit_rank, "--exit-rank");
  inWorld(o.sync_rank, "--sync-rank");
  inWorld(o.gc_rank, "--gc-rank");
  inWorld(o.slow_dataloader_rank, "--slow-dataloader-rank");
  inWorld(o.skip_microbatch_rank, "--skip-microbatch-rank");
  inWorld(o.extra_work_rank, "--extra-work-rank");
  if (world_size % (o.tp * o.pp) != 0)
    throw UsageError(o.pp == 1 ? fmt::format("--tp {} does not divide the world size {}", o.tp, world_size)
                               : fmt::format("--tp {} x --pp {} does not divide the world size {}", o.tp, o.pp,
                                             world_size));
  if (o.pp > 1 && o.stall_rank && o.stall_kind == StallKind::Dataloader) {
    const int stage = *o.stall_rank / (world_size / o.pp);
    if (stage != 0 && stage != o.pp - 1)
      throw UsageError(fmt::format("--stall-kind dataloader: rank {} is in stage {}, which reads no data (only the "
                                   "first and last stages do)",
                                   *o.stall_rank, stage));
  }
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

  std::unique_ptr<Bootstrap> boot = startBootstrap(&argc, &argv);
  const int rank = boot->rank();
  CheckIdentity::program = "ring_train";
  CheckIdentity::rank = rank;
  CheckIdentity::bootstrap = boot.get();
  try {
    checkAgainstWorld(options, boot->size());
  } catch (const UsageError& e) {
    if (rank == 0) std::fprintf(stderr, "ring_train: %s\n", e.what());
    boot->finalize();
    return 2;
  }

  std::printf("ring_train rank=%d pid=%d\n", rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  if (options.pp > 1) {
    PipelineTrainer trainer(options, *boot);
    trainer.run();
  } else {
    Trainer trainer(options, *boot);
    trainer.run();
  }
  boot->finalize();
  return 0;
}
