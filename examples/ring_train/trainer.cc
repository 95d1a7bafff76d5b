#include "trainer.h"

#include <algorithm>
#include <cstdio>

#include "communicators.h"
#include "gpu_check.h"
#include "host_stalls.h"
#include "result_checks.h"
#include "train_loop.h"

namespace {

constexpr float kLearningRate = 1e-6f;

}  // namespace

Trainer::Trainer(const TrainOptions& options, Bootstrap& boot)
    : options_(options), boot_(boot), rank_(boot.rank()), world_size_(boot.size()) {
  selectDevice(boot_);
  CUDA_CHECK(cudaStreamCreate(&stream_));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));

  world_ = joinWorld(boot_, options_.nonblocking, [this] {
    // The bug being reproduced: one rank never joins the communicator the others wait in.
    if (options_.stall_at_init && options_.stall_rank == rank_) misbehaveBeforeCollectives(-1);
  });
  if (options_.tp > 1) tp_ = joinTensorParallelGroup(boot_, options_.tp, options_.nonblocking);

  model_ = std::make_unique<Model>(
      ModelShape{options_.layers, options_.hidden, options_.batch, options_.dtype}, stream_, cublas_, rank_ + 1);

  grad_count_ = std::max<size_t>(1, static_cast<size_t>(options_.grad_mb * 1024 * 1024 / sizeof(float)));
  grads_ = deviceFloats(grad_count_);
  grads_host_.resize(grad_count_);

  if (options_.tp > 1) {
    tp_block_ = static_cast<size_t>(options_.hidden) * options_.batch;
    tp_shard_ = deviceFloats(tp_block_);
    tp_gathered_ = deviceFloats(tp_block_ * tp_.size);
    tp_partials_ = deviceFloats(tp_block_ * tp_.size);
    tp_reduced_ = deviceFloats(tp_block_);
    tp_gathered_host_.resize(tp_block_ * tp_.size);
    tp_reduced_host_.resize(tp_block_);
  }

  DataloaderPlan plan;
  plan.steps = options_.steps;
  plan.elements = static_cast<size_t>(options_.hidden) * options_.batch;
  plan.half_precision = options_.dtype == DType::F16;
  plan.host_ms_per_batch = options_.slow_dataloader_rank == rank_ ? options_.slow_dataloader_ms
                                                                  : options_.dataloader_ms;
  if (options_.stall_rank == rank_ && options_.stall_kind == StallKind::Dataloader)
    plan.deadlock_at_step = options_.stall_at_step;
  dataloader_ = std::make_unique<Dataloader>(plan);
}

Trainer::~Trainer() {
  if (allreduce_exec_) cudaGraphExecDestroy(allreduce_exec_);
  if (allreduce_graph_) cudaGraphDestroy(allreduce_graph_);
  dataloader_.reset();
  model_.reset();
  for (float* p : {grads_, tp_shard_, tp_gathered_, tp_partials_, tp_reduced_})
    if (p) cudaFree(p);
  if (tp_.comm) ncclCommDestroy(tp_.comm);
  if (world_) ncclCommDestroy(world_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Trainer::run() {
  runTrainingLoop(options_, boot_, [this](int s) { step(s); }, "tp=" + std::to_string(options_.tp));
}

bool Trainer::syncsEveryLayer() const {
  return options_.sync_every_layer && (!options_.sync_rank || *options_.sync_rank == rank_);
}

void Trainer::step(int s) {
  const Batch batch = dataloader_->next();
  if (options_.gc_pause_ms > 0 && (!options_.gc_rank || *options_.gc_rank == rank_) &&
      (s + 1) % options_.gc_every == 0)
    gc_pause(options_.gc_pause_ms);

  CUDA_CHECK(cudaMemcpyAsync(model_->input(), batch.bytes.data(), model_->inputBytes(), cudaMemcpyHostToDevice,
                             stream_));
  model_->forward(syncsEveryLayer());
  model_->backward(syncsEveryLayer());

  misbehaveBeforeCollectives(s);
  reduceGradients(s);
  if (options_.exit_rank == rank_ && options_.exit_at_step == s) {
    if (options_.exit_how == ExitHow::Stop) freeze_mid_collective(s);
    else exit_mid_collective(s, static_cast<int>(options_.exit_how));
  }
  if (options_.tp > 1) runTensorParallel(s);

  CUDA_CHECK(launchSgdUpdate(model_->masterWeights(), grads_, std::min(grad_count_, model_->masterWeightCount()),
                             kLearningRate, stream_));
  CUDA_CHECK(cudaMemcpyAsync(grads_host_.data(), grads_, grad_count_ * sizeof(float), cudaMemcpyDeviceToHost,
                             stream_));
  if (options_.tp > 1) {
    CUDA_CHECK(cudaMemcpyAsync(tp_gathered_host_.data(), tp_gathered_, tp_gathered_host_.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaMemcpyAsync(tp_reduced_host_.data(), tp_reduced_, tp_block_ * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  if (!options_.verify) return;
  checkAllReduce(grads_host_.data(), grad_count_, world_size_, rank_, s);
  if (options_.tp > 1) {
    checkAllGather(tp_gathered_host_.data(), tp_block_, tp_.first_global, tp_.size, rank_, s);
    checkReduceScatter(tp_reduced_host_.data(), tp_block_, tp_.first_global, tp_.size, tp_.rank, rank_, s);
  }
}

// Step -1: before the world communicator's init (--stall-at-step init).
void Trainer::misbehaveBeforeCollectives(int s) {
  if (options_.stall_rank != rank_ || (s < 0 ? !options_.stall_at_init : options_.stall_at_step != s)) return;
  if (options_.stall_at_init && s >= 0) return;
  if (options_.stall_kind == StallKind::HostLoop) stall_in_host_loop(s);
  if (options_.stall_kind == StallKind::Sleep) stall_in_sleep(s);
}

void Trainer::reduceGradients(int s) {
  CUDA_CHECK(launchFillPattern(grads_, grad_count_, Pattern::Gradient, rank_, s, 0, stream_));
  if (options_.mismatch_rank == rank_ && options_.mismatch_at_step == s) {
    // The bug being reproduced: this rank disagrees with the others on the collective.
    const size_t per_rank = grad_count_ / world_size_;
    NCCL_CHECK_ON(world_, ncclAllGather(grads_ + rank_ * per_rank, grads_, per_rank, ncclFloat32, world_, stream_));
    return;
  }
  if (options_.cuda_graph && s >= options_.graph_warmup) {
    // As CUDA-graph training loops do: capture the collective once, then replay it.
    if (allreduce_exec_ == nullptr) {
      CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
      NCCL_CHECK_ON(world_, ncclAllReduce(grads_, grads_, grad_count_, ncclFloat32, ncclSum, world_, stream_));
      CUDA_CHECK(cudaStreamEndCapture(stream_, &allreduce_graph_));
      CUDA_CHECK(cudaGraphInstantiate(&allreduce_exec_, allreduce_graph_, 0));
    }
    CUDA_CHECK(cudaGraphLaunch(allreduce_exec_, stream_));
    return;
  }
  NCCL_CHECK_ON(world_, ncclAllReduce(grads_, grads_, grad_count_, ncclFloat32, ncclSum, world_, stream_));
}

void Trainer::runTensorParallel(int s) {
  CUDA_CHECK(launchFillPattern(tp_shard_, tp_block_, Pattern::TpShard, rank_, s, 0, stream_));
  NCCL_CHECK_ON(tp_.comm, ncclAllGather(tp_shard_, tp_gathered_, tp_block_, ncclFloat32, tp_.comm, stream_));
  CUDA_CHECK(launchFillPattern(tp_partials_, tp_block_ * tp_.size, Pattern::TpPartial, rank_, s, 0, stream_));
  NCCL_CHECK_ON(tp_.comm, ncclReduceScatter(tp_partials_, tp_reduced_, tp_block_, ncclFloat32, ncclSum, tp_.comm, stream_));
}
