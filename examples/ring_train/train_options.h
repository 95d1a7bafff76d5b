#pragma once
// Command line of ring_train (DESIGN.md §3 names the misbehaviour flags).
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels.h"

enum class StallKind { HostLoop, Dataloader, Sleep };
// Where a rank's extra work goes (--extra-work-in): before its first transfer of the step (on
// a later stage, the warm-up bubble), into every forward, or after its optimizer step.
enum class ExtraWorkIn { Bubble, Forward, Optimizer };
// How a rank's process ends in the middle of a collective: SIGKILL (the OOM killer, a node
// agent), abort() (a failed assertion: SIGABRT), or exit(1) (an uncaught error path).
enum class ExitHow { Kill, Abort, Exit, Stop };

struct TrainOptions {
  int steps = 50;
  int layers = 4;
  int hidden = 256;
  int batch = 32;
  DType dtype = DType::F32;
  double grad_mb = 4.0;
  int tp = 1;
  int pp = 1;            // pipeline stages; > 1 runs the 1F1B pipeline job (pipeline_trainer.h)
  int microbatches = 4;  // per step, with --pp
  int dataloader_ms = 0;
  int log_every = 1;

  std::optional<int> stall_rank;
  int stall_at_step = 0;
  bool stall_at_init = false;  // --stall-at-step init: gets the world's unique id, never calls init
  StallKind stall_kind = StallKind::HostLoop;

  std::optional<int> exit_rank;
  int exit_at_step = 0;
  ExitHow exit_how = ExitHow::Kill;

  std::optional<int> mismatch_rank;
  int mismatch_at_step = 0;

  std::optional<int> skip_microbatch_rank;  // with --pp: runs one micro-batch fewer at that step
  int skip_at_step = 0;

  // With --pp: from that step on, the rank runs extra GEMMs (a slowdown the schedule may absorb).
  std::optional<int> extra_work_rank;
  int extra_work_at_step = 0;
  int extra_work_gemms = 8;
  ExtraWorkIn extra_work_in = ExtraWorkIn::Bubble;

  bool sync_every_layer = false;
  std::optional<int> sync_rank;  // every rank when empty

  int gc_pause_ms = 0;
  std::optional<int> gc_rank;  // every rank when empty
  int gc_every = 10;

  std::optional<int> slow_dataloader_rank;
  int slow_dataloader_ms = 0;

  bool nonblocking = false;  // communicators made with config.blocking = 0
  bool cuda_graph = false;  // the gradient AllReduce captured once, replayed every step
  int graph_warmup = 2;     // eager steps before the capture

  bool verify = true;  // check every collective's result on the host

  bool help = false;
};

// A command line the program cannot run with; the message is meant for the user.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TrainOptions parseTrainOptions(int argc, char** argv);
std::string trainUsage();
