#pragma once
// One rank of a tensor x pipeline x data parallel job, laid out as Megatron-LM does
// (order tp-dp-pp: global rank = tp_rank + tp * (dp_rank + dp * stage)). Each stage runs
// its layers on M micro-batches on the 1F1B schedule (pipeline_schedule.h), sends
// activations forward and gradients backward with grouped ncclSend/ncclRecv, all-reduces
// each block's output in its tensor-parallel group, and all-reduces its gradients in its
// data-parallel group at the end of the step. All three communicators are
// ncclCommSplit()s of the world, as Megatron builds its groups.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "communicators.h"
#include "dataloader.h"
#include "model.h"
#include "pipeline_schedule.h"
#include "train_options.h"

struct ParallelGroup {
  ncclComm_t comm = nullptr;  // null when the group is this rank alone
  int rank = 0;
  int size = 1;
  std::vector<int> members;  // global ranks, in communicator rank order
};

class PipelineTrainer {
 public:
  PipelineTrainer(const TrainOptions& options, Bootstrap& boot);
  ~PipelineTrainer();
  PipelineTrainer(const PipelineTrainer&) = delete;
  PipelineTrainer& operator=(const PipelineTrainer&) = delete;

  void run();

 private:
  ParallelGroup split(int color, const std::vector<int>& members);
  void step(int s);
  void runSchedule(int s, const std::vector<PipeStep>& schedule);
  void forward(int s, int microbatch);
  void backward(int s, int microbatch);
  void transfer(int s, const PipeStep& step);
  void tensorParallelAllReduce(int s, int microbatch);
  void reduceGradients(int s);
  void verify(int s, int microbatches_run);
  void misbehave(int s);
  bool extraWork(int s, ExtraWorkIn where) const;
  int activationId(int stage, int microbatch) const;

  TrainOptions options_;
  Bootstrap& boot_;
  int rank_;
  int world_size_;
  int stage_ = 0;
  int stages_ = 1;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  ncclComm_t world_ = nullptr;
  ParallelGroup tp_;
  ParallelGroup dp_;
  ParallelGroup pp_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Dataloader> dataloader_;

  size_t act_count_ = 0;          // elements of one activation (hidden x batch)
  std::vector<float*> act_in_;    // per micro-batch: received from the previous stage
  std::vector<float*> act_out_;   // per micro-batch: sent to the next stage
  std::vector<float*> grad_in_;   // per micro-batch: received from the next stage
  std::vector<float*> grad_out_;  // per micro-batch: sent to the previous stage
  float* tp_buffer_ = nullptr;
  size_t grad_count_ = 0;
  float* grads_ = nullptr;

  std::vector<float> host_act_;  // act_in_ and grad_in_ copied back for the checks
  std::vector<float> host_grad_;
  std::vector<float> host_tp_;
  std::vector<float> host_grads_;
};
