#include "train_options.h"

#include <charconv>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace {

template <typename T>
T parseNumber(std::string_view flag, std::string_view text, T min) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    throw UsageError(fmt::format("bad value '{}' for {}: expected a number", text, flag));
  if (value < min) {
    if constexpr (std::is_floating_point_v<T>)  // "0.000000", as std::to_string wrote it
      throw UsageError(fmt::format("bad value '{}' for {}: must be >= {:f}", text, flag, min));
    else
      throw UsageError(fmt::format("bad value '{}' for {}: must be >= {}", text, flag, min));
  }
  return value;
}

ExtraWorkIn parseExtraWorkIn(std::string_view text) {
  if (text == "bubble") return ExtraWorkIn::Bubble;
  if (text == "forward") return ExtraWorkIn::Forward;
  if (text == "optimizer") return ExtraWorkIn::Optimizer;
  throw UsageError("--extra-work-in must be bubble, forward or optimizer, not '" + std::string(text) + "'");
}

StallKind parseStallKind(std::string_view text) {
  if (text == "host-loop") return StallKind::HostLoop;
  if (text == "dataloader") return StallKind::Dataloader;
  if (text == "sleep") return StallKind::Sleep;
  throw UsageError("bad value '" + std::string(text) + "' for --stall-kind: expected host-loop, dataloader or sleep");
}

ExitHow parseExitHow(std::string_view text) {
  if (text == "kill") return ExitHow::Kill;
  if (text == "abort") return ExitHow::Abort;
  if (text == "exit") return ExitHow::Exit;
  if (text == "stop") return ExitHow::Stop;
  throw UsageError("bad value '" + std::string(text) + "' for --exit-how: expected kill, abort, exit or stop");
}

DType parseDType(std::string_view text) {
  if (text == "fp32") return DType::F32;
  if (text == "fp16") return DType::F16;
  throw UsageError("bad value '" + std::string(text) + "' for --dtype: expected fp32 or fp16");
}

}  // namespace

std::string trainUsage() {
  return R"(usage: ring_train [options]   (run one process per rank, e.g. under mpirun)
  --steps N                 training steps (default 50)
  --layers L --hidden H --batch B   GEMM shapes per layer (default 4, 256, 32)
  --dtype fp32|fp16         GEMM data type (default fp32)
  --grad-mb M               gradient AllReduce size in MiB (default 4)
  --tp T                    tensor-parallel groups of T consecutive ranks (default 1: none)
  --pp P [--microbatches M] a P-stage pipeline (default 1: none) running M micro-batches
                            per step (default 4) on the 1F1B schedule, with grouped
                            ncclSend/ncclRecv between stages; world = TP x PP x DP, laid
                            out as Megatron does (rank = tp_rank + TP * (dp_rank + DP * stage)),
                            every group an ncclCommSplit of the world; only the first and
                            last stages read data
  --skip-microbatch-rank R --skip-at-step S
                            with --pp: rank R (with its tensor-parallel group, which runs the
                            same schedule) runs one micro-batch fewer at step S, so its sends
                            and receives no longer match the neighbouring stages'
  --extra-work-rank R --extra-work-at-step S [--extra-work-gemms N] [--extra-work-in bubble|forward|optimizer]
                            with --pp: from step S on, rank R runs N (default 8) more GEMMs of
                            a layer's forward shape each step: before its first transfer
                            (default; on a later stage that is the warm-up bubble, where the
                            schedule absorbs work shorter than the bubble; on the first stage
                            it delays the whole pipeline), in every forward (a heavier stage),
                            or after its optimizer step
  --dataloader-ms M         host work per batch in the dataloader thread (default 0)
  --log-every N             print "step=S done" every N steps (default 1)
  --stall-rank R --stall-at-step S|init --stall-kind host-loop|dataloader|sleep
                            rank R stops calling collectives at step S; with init, it
                            gets the world communicator's unique id and never calls
                            ncclCommInitRank (host-loop or sleep)
  --exit-rank R --exit-at-step S [--exit-how kill|abort|exit|stop]
                            rank R's process ends right after it enqueued step S's
                            gradient AllReduce (default kill: SIGKILL, as the OOM killer;
                            stop: SIGSTOP, frozen but alive, as a stopped or hung host)
  --mismatch-rank R --mismatch-at-step S
                            rank R calls AllGather instead of the gradient AllReduce
  --sync-every-layer [--sync-rank R]
                            cudaDeviceSynchronize after every layer (all ranks or rank R)
  --gc-pause-ms M [--gc-rank R] [--gc-every N]
                            host pause of M ms every N steps (default 10)
  --slow-dataloader-rank R --slow-dataloader-ms M
                            rank R's dataloader spends M ms per batch
  --nonblocking             non-blocking communicators (config.blocking = 0), polled
                            with ncclCommGetAsyncError after every call
  --cuda-graph [--graph-warmup N]
                            after N eager steps (default 2), capture the gradient AllReduce
                            into a CUDA graph once and replay it every step
  --no-verify               do not check the collectives' results (for kernels that
                            compute nothing: nvcc's run as opaque work on simgpu's drop-in)
  --help                    this text
)";
}

namespace {

// The flags given without a value: true when `arg` was one.
bool takeSwitch(std::string_view arg, TrainOptions& o) {
  const std::map<std::string_view, bool TrainOptions::*> switches = {
      {"--help", &TrainOptions::help},         {"-h", &TrainOptions::help},
      {"--sync-every-layer", &TrainOptions::sync_every_layer}, {"--nonblocking", &TrainOptions::nonblocking},
      {"--cuda-graph", &TrainOptions::cuda_graph}};
  if (arg == "--no-verify") {
    o.verify = false;
    return true;
  }
  const auto it = switches.find(arg);
  if (it == switches.end()) return false;
  o.*(it->second) = true;
  return true;
}

void checkTogether(const TrainOptions& o, bool stall_step_given, bool exit_step_given, bool mismatch_step_given) {
  if (o.stall_rank && !stall_step_given) throw UsageError("--stall-rank needs --stall-at-step");
  if (o.stall_at_init && o.stall_kind == StallKind::Dataloader)
    throw UsageError("--stall-at-step init needs --stall-kind host-loop or sleep: no dataloader runs before init");
  if (o.exit_rank && !exit_step_given) throw UsageError("--exit-rank needs --exit-at-step");
  if (o.mismatch_rank && !mismatch_step_given) throw UsageError("--mismatch-rank needs --mismatch-at-step");
  if (o.slow_dataloader_rank.has_value() != (o.slow_dataloader_ms > 0))
    throw UsageError("--slow-dataloader-rank and --slow-dataloader-ms go together");
  if (o.sync_rank && !o.sync_every_layer) throw UsageError("--sync-rank needs --sync-every-layer");
}

// What the pipeline job does not run, refused rather than ignored.
void checkPipeline(const TrainOptions& o, bool skip_step_given, bool extra_step_given) {
  if (o.skip_microbatch_rank && !skip_step_given) throw UsageError("--skip-microbatch-rank needs --skip-at-step");
  if (o.extra_work_rank && !extra_step_given) throw UsageError("--extra-work-rank needs --extra-work-at-step");
  if (o.pp == 1) {
    if (o.skip_microbatch_rank) throw UsageError("--skip-microbatch-rank needs --pp");
    if (o.extra_work_rank) throw UsageError("--extra-work-rank needs --pp");
    return;
  }
  if (o.skip_microbatch_rank && o.microbatches < 2)
    throw UsageError("--skip-microbatch-rank needs --microbatches 2 or more: a step runs at least one");
  if (o.mismatch_rank) throw UsageError("--mismatch-rank is for the data-parallel job; with --pp use --skip-microbatch-rank");
  if (o.cuda_graph) throw UsageError("--cuda-graph is not run with --pp");
  if (o.sync_every_layer) throw UsageError("--sync-every-layer is not run with --pp");
  if (o.stall_at_init) throw UsageError("--stall-at-step init is not run with --pp");
}

// Which --*-at-step options the command line gave (their checks need to know).
struct StepsGiven {
  bool stall = false, exit = false, mismatch = false, skip = false, extra = false;
};

using Setter = std::function<void(std::string_view flag, std::string_view value)>;

// Every option that takes a value, setting `o` (and `given`).
std::map<std::string_view, Setter> valueOptions(TrainOptions& o, StepsGiven& given) {
  return {
      {"--steps", [&](auto f, auto v) { o.steps = parseNumber<int>(f, v, 0); }},
      {"--layers", [&](auto f, auto v) { o.layers = parseNumber<int>(f, v, 1); }},
      {"--hidden", [&](auto f, auto v) { o.hidden = parseNumber<int>(f, v, 1); }},
      {"--batch", [&](auto f, auto v) { o.batch = parseNumber<int>(f, v, 1); }},
      {"--dtype", [&](auto, auto v) { o.dtype = parseDType(v); }},
      {"--grad-mb", [&](auto f, auto v) { o.grad_mb = parseNumber<double>(f, v, 0.0); }},
      {"--tp", [&](auto f, auto v) { o.tp = parseNumber<int>(f, v, 1); }},
      {"--pp", [&](auto f, auto v) { o.pp = parseNumber<int>(f, v, 1); }},
      {"--microbatches", [&](auto f, auto v) { o.microbatches = parseNumber<int>(f, v, 1); }},
      {"--skip-microbatch-rank", [&](auto f, auto v) { o.skip_microbatch_rank = parseNumber<int>(f, v, 0); }},
      {"--skip-at-step",
       [&](auto f, auto v) {
         o.skip_at_step = parseNumber<int>(f, v, 0);
         given.skip = true;
       }},
      {"--extra-work-rank", [&](auto f, auto v) { o.extra_work_rank = parseNumber<int>(f, v, 0); }},
      {"--extra-work-at-step",
       [&](auto f, auto v) {
         o.extra_work_at_step = parseNumber<int>(f, v, 0);
         given.extra = true;
       }},
      {"--extra-work-gemms", [&](auto f, auto v) { o.extra_work_gemms = parseNumber<int>(f, v, 1); }},
      {"--extra-work-in", [&](auto, auto v) { o.extra_work_in = parseExtraWorkIn(v); }},
      {"--dataloader-ms", [&](auto f, auto v) { o.dataloader_ms = parseNumber<int>(f, v, 0); }},
      {"--log-every", [&](auto f, auto v) { o.log_every = parseNumber<int>(f, v, 1); }},
      {"--stall-rank", [&](auto f, auto v) { o.stall_rank = parseNumber<int>(f, v, 0); }},
      {"--stall-at-step",
       [&](auto f, auto v) {
         if (v == "init")
           o.stall_at_init = true;
         else
           o.stall_at_step = parseNumber<int>(f, v, 0);
         given.stall = true;
       }},
      {"--exit-rank", [&](auto f, auto v) { o.exit_rank = parseNumber<int>(f, v, 0); }},
      {"--exit-at-step",
       [&](auto f, auto v) {
         o.exit_at_step = parseNumber<int>(f, v, 0);
         given.exit = true;
       }},
      {"--exit-how", [&](auto, auto v) { o.exit_how = parseExitHow(v); }},
      {"--stall-kind", [&](auto, auto v) { o.stall_kind = parseStallKind(v); }},
      {"--mismatch-rank", [&](auto f, auto v) { o.mismatch_rank = parseNumber<int>(f, v, 0); }},
      {"--mismatch-at-step",
       [&](auto f, auto v) {
         o.mismatch_at_step = parseNumber<int>(f, v, 0);
         given.mismatch = true;
       }},
      {"--sync-rank", [&](auto f, auto v) { o.sync_rank = parseNumber<int>(f, v, 0); }},
      {"--gc-pause-ms", [&](auto f, auto v) { o.gc_pause_ms = parseNumber<int>(f, v, 0); }},
      {"--graph-warmup", [&](auto f, auto v) { o.graph_warmup = parseNumber<int>(f, v, 0); }},
      {"--gc-rank", [&](auto f, auto v) { o.gc_rank = parseNumber<int>(f, v, 0); }},
      {"--gc-every", [&](auto f, auto v) { o.gc_every = parseNumber<int>(f, v, 1); }},
      {"--slow-dataloader-rank", [&](auto f, auto v) { o.slow_dataloader_rank = parseNumber<int>(f, v, 0); }},
      {"--slow-dataloader-ms", [&](auto f, auto v) { o.slow_dataloader_ms = parseNumber<int>(f, v, 0); }},
  };
}

}  // namespace

TrainOptions parseTrainOptions(int argc, char** argv) {
  TrainOptions o;
  StepsGiven given;
  const std::map<std::string_view, Setter> with_value = valueOptions(o, given);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool inline_value = false;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    if (!inline_value && takeSwitch(arg, o)) continue;
    const auto it = with_value.find(arg);
    if (it == with_value.end()) throw UsageError("unknown option '" + std::string(arg) + "'");
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("option " + std::string(arg) + " needs a value");
      value = argv[++i];
    }
    it->second(arg, value);
  }

  checkTogether(o, given.stall, given.exit, given.mismatch);
  checkPipeline(o, given.skip, given.extra);
  return o;
}
