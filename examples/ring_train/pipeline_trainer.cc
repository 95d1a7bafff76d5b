#include "pipeline_trainer.h"

#include <algorithm>
#include <cstdio>

#include "gpu_check.h"
#include "host_stalls.h"
#include "result_checks.h"
#include "train_loop.h"

namespace {

constexpr float kLearningRate = 1e-6f;

std::vector<float*> deviceBuffers(int n, size_t count) {
  std::vector<float*> buffers;
  for (int i = 0; i < n; ++i) buffers.push_back(deviceFloats(count));
  return buffers;
}

}  // namespace

PipelineTrainer::PipelineTrainer(const TrainOptions& options, Bootstrap& boot)
    : options_(options), boot_(boot), rank_(boot.rank()), world_size_(boot.size()), stages_(options.pp) {
  selectDevice(boot_);
  CUDA_CHECK(cudaStreamCreate(&stream_));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  world_ = joinWorld(boot_, options_.nonblocking);

  const int tp = options_.tp;
  const int dp = world_size_ / (tp * stages_);
  const int tp_rank = rank_ % tp;
  const int dp_rank = rank_ / tp % dp;
  stage_ = rank_ / (tp * dp);
  // Every rank calls every split in the same order (NCCL's split is collective on the world).
  std::vector<int> tp_members, dp_members, pp_members;
  for (int t = 0; t < tp; ++t) tp_members.push_back(t + tp * (dp_rank + dp * stage_));
  for (int d = 0; d < dp; ++d) dp_members.push_back(tp_rank + tp * (d + dp * stage_));
  for (int p = 0; p < stages_; ++p) pp_members.push_back(tp_rank + tp * (dp_rank + dp * p));
  tp_ = split(rank_ / tp, tp_members);
  dp_ = split(stage_ * tp + tp_rank, dp_members);
  pp_ = split(dp_rank * tp + tp_rank, pp_members);

  model_ = std::make_unique<Model>(ModelShape{options_.layers, options_.hidden, options_.batch, options_.dtype},
                                   stream_, cublas_, rank_ + 1);
  act_count_ = static_cast<size_t>(options_.hidden) * options_.batch;
  const int m = options_.microbatches;
  act_in_ = deviceBuffers(m, act_count_);
  act_out_ = deviceBuffers(m, act_count_);
  grad_in_ = deviceBuffers(m, act_count_);
  grad_out_ = deviceBuffers(m, act_count_);
  tp_buffer_ = deviceFloats(act_count_);
  grad_count_ = std::max<size_t>(1, static_cast<size_t>(options_.grad_mb * 1024 * 1024 / sizeof(float)));
  grads_ = deviceFloats(grad_count_);
  host_act_.resize(act_count_ * m);
  host_grad_.resize(act_count_ * m);
  host_tp_.resize(act_count_);
  host_grads_.resize(grad_count_);

  // Megatron's data iterator exists on the first stage (inputs) and the last (labels) only.
  if (stage_ == 0 || stage_ == stages_ - 1) {
    DataloaderPlan plan;
    plan.steps = options_.steps;
    plan.elements = act_count_;
    plan.half_precision = options_.dtype == DType::F16;
    plan.host_ms_per_batch =
        options_.slow_dataloader_rank == rank_ ? options_.slow_dataloader_ms : options_.dataloader_ms;
    if (options_.stall_rank == rank_ && options_.stall_kind == StallKind::Dataloader)
      plan.deadlock_at_step = options_.stall_at_step;
    dataloader_ = std::make_unique<Dataloader>(plan);
  }
}

PipelineTrainer::~PipelineTrainer() {
  dataloader_.reset();
  model_.reset();
  for (const auto* buffers : {&act_in_, &act_out_, &grad_in_, &grad_out_})
    for (float* p : *buffers) cudaFree(p);
  for (float* p : {tp_buffer_, grads_})
    if (p) cudaFree(p);
  for (ncclComm_t c : {pp_.comm, dp_.comm, tp_.comm, world_})
    if (c) ncclCommDestroy(c);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

ParallelGroup PipelineTrainer::split(int color, const std::vector<int>& members) {
  ParallelGroup g;
  g.members = members;
  g.size = static_cast<int>(members.size());
  g.rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  // A group of one rank has no communicator, and no rank of the world splits it: the split
  // is collective, so whether to split depends on the group's size alone, the same everywhere.
  if (g.size == 1) return g;
  NCCL_CHECK_ON(world_, ncclCommSplit(world_, color, rank_, &g.comm, nullptr));
  if (options_.nonblocking) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) NCCL_CHECK(ncclCommGetAsyncError(g.comm, &state));
    NCCL_CHECK(state);
  }
  return g;
}

void PipelineTrainer::run() {
  const std::string shape = "tp=" + std::to_string(options_.tp) + " pp=" + std::to_string(stages_) +
                            " dp=" + std::to_string(dp_.size) + " microbatches=" + std::to_string(options_.microbatches);
  runTrainingLoop(options_, boot_, [this](int s) { step(s); }, shape, " stage=" + std::to_string(stage_));
}

void PipelineTrainer::step(int s) {
  if (options_.gc_pause_ms > 0 && (!options_.gc_rank || *options_.gc_rank == rank_) && (s + 1) % options_.gc_every == 0)
    gc_pause(options_.gc_pause_ms);
  if (dataloader_) {
    const Batch batch = dataloader_->next();
    CUDA_CHECK(
        cudaMemcpyAsync(model_->input(), batch.bytes.data(), model_->inputBytes(), cudaMemcpyHostToDevice, stream_));
  }
  misbehave(s);
  int microbatches = options_.microbatches;
  // The bug: a schedule off by one. Its tensor-parallel group runs the same code on the same data.
  const auto skips = [&](int r) { return r / options_.tp == rank_ / options_.tp; };
  if (options_.skip_microbatch_rank && skips(*options_.skip_microbatch_rank) && options_.skip_at_step == s)
    --microbatches;
  if (extraWork(s, ExtraWorkIn::Bubble)) model_->extraGemms(options_.extra_work_gemms);
  runSchedule(s, oneFOneB(stage_, stages_, microbatches));
  reduceGradients(s);
  if (options_.exit_rank == rank_ && options_.exit_at_step == s) {
    if (options_.exit_how == ExitHow::Stop)
      freeze_mid_collective(s);
    else
      exit_mid_collective(s, static_cast<int>(options_.exit_how));
  }
  CUDA_CHECK(launchSgdUpdate(model_->masterWeights(), grads_, std::min(grad_count_, model_->masterWeightCount()),
                             kLearningRate, stream_));
  if (extraWork(s, ExtraWorkIn::Optimizer)) model_->extraGemms(options_.extra_work_gemms);
  if (options_.verify)
    verify(s, microbatches);
  else
    CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void PipelineTrainer::runSchedule(int s, const std::vector<PipeStep>& schedule) {
  for (const PipeStep& p : schedule) {
    if (p.action == PipeAction::Forward)
      forward(s, p.microbatch);
    else if (p.action == PipeAction::Backward)
      backward(s, p.microbatch);
    else
      transfer(s, p);
  }
}

int PipelineTrainer::activationId(int global_rank, int microbatch) const {
  return global_rank * options_.microbatches + microbatch;
}

void PipelineTrainer::forward(int s, int microbatch) {
  if (stage_ > 0)
    CUDA_CHECK(
        cudaMemcpyAsync(model_->input(), act_in_[microbatch], model_->inputBytes(), cudaMemcpyDeviceToDevice, stream_));
  model_->forward(false);
  if (extraWork(s, ExtraWorkIn::Forward)) model_->extraGemms(options_.extra_work_gemms);
  tensorParallelAllReduce(s, microbatch);
  if (stage_ + 1 < stages_)
    CUDA_CHECK(launchFillPattern(act_out_[microbatch], act_count_, Pattern::Activation, activationId(rank_, microbatch),
                                 s, 0, stream_));
}

void PipelineTrainer::backward(int s, int microbatch) {
  model_->backward(false);
  tensorParallelAllReduce(s, microbatch);
  if (stage_ > 0)
    CUDA_CHECK(launchFillPattern(grad_out_[microbatch], act_count_, Pattern::ActGrad, activationId(rank_, microbatch),
                                 s, 0, stream_));
}

// A row-parallel block's output, summed over the tensor-parallel group.
void PipelineTrainer::tensorParallelAllReduce(int s, int) {
  if (tp_.comm == nullptr) return;
  CUDA_CHECK(launchFillPattern(tp_buffer_, act_count_, Pattern::TpBlock, rank_, s, 0, stream_));
  NCCL_CHECK_ON(tp_.comm, ncclAllReduce(tp_buffer_, tp_buffer_, act_count_, ncclFloat32, ncclSum, tp_.comm, stream_));
}

// One group: Megatron's send_forward_recv_backward and its kin.
void PipelineTrainer::transfer(int, const PipeStep& step) {
  NCCL_CHECK(ncclGroupStart());
  for (const PipeTransferPart& part : step.parts) {
    const bool to_next = part.send == part.forward;
    const int peer = pp_.rank + (to_next ? 1 : -1);
    const int mb = part.microbatch;
    if (part.send) {
      float* buffer = part.forward ? act_out_[mb] : grad_out_[mb];
      NCCL_CHECK_ON(pp_.comm, ncclSend(buffer, act_count_, ncclFloat32, peer, pp_.comm, stream_));
    } else {
      float* buffer = part.forward ? act_in_[mb] : grad_in_[mb];
      NCCL_CHECK_ON(pp_.comm, ncclRecv(buffer, act_count_, ncclFloat32, peer, pp_.comm, stream_));
    }
  }
  NCCL_CHECK_ON(pp_.comm, ncclGroupEnd());
}

void PipelineTrainer::reduceGradients(int s) {
  CUDA_CHECK(launchFillPattern(grads_, grad_count_, Pattern::Gradient, rank_, s, 0, stream_));
  if (dp_.comm != nullptr)
    NCCL_CHECK_ON(dp_.comm, ncclAllReduce(grads_, grads_, grad_count_, ncclFloat32, ncclSum, dp_.comm, stream_));
}

void PipelineTrainer::verify(int s, int microbatches_run) {
  const size_t bytes = act_count_ * sizeof(float);
  for (int mb = 0; mb < microbatches_run; ++mb) {
    if (stage_ > 0)
      CUDA_CHECK(cudaMemcpyAsync(&host_act_[mb * act_count_], act_in_[mb], bytes, cudaMemcpyDeviceToHost, stream_));
    if (stage_ + 1 < stages_)
      CUDA_CHECK(cudaMemcpyAsync(&host_grad_[mb * act_count_], grad_in_[mb], bytes, cudaMemcpyDeviceToHost, stream_));
  }
  if (tp_.comm) CUDA_CHECK(cudaMemcpyAsync(host_tp_.data(), tp_buffer_, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_grads_.data(), grads_, grad_count_ * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  for (int mb = 0; mb < microbatches_run; ++mb) {
    if (stage_ > 0)
      checkPattern(&host_act_[mb * act_count_], act_count_, Pattern::Activation,
                   activationId(pp_.members[pp_.rank - 1], mb), rank_, s);
    if (stage_ + 1 < stages_)
      checkPattern(&host_grad_[mb * act_count_], act_count_, Pattern::ActGrad,
                   activationId(pp_.members[pp_.rank + 1], mb), rank_, s);
  }
  if (tp_.comm) checkSumOf(host_tp_.data(), act_count_, Pattern::TpBlock, tp_.members, rank_, s);
  checkSumOf(host_grads_.data(), grad_count_, Pattern::Gradient, dp_.members, rank_, s);
}

// The injected slowdown: from its step on, this rank's extra GEMMs in that place.
bool PipelineTrainer::extraWork(int s, ExtraWorkIn where) const {
  return options_.extra_work_rank == rank_ && s >= options_.extra_work_at_step && options_.extra_work_in == where;
}

void PipelineTrainer::misbehave(int s) {
  if (options_.stall_rank != rank_ || options_.stall_at_step != s) return;
  if (options_.stall_kind == StallKind::HostLoop) stall_in_host_loop(s);
  if (options_.stall_kind == StallKind::Sleep) stall_in_sleep(s);
}
