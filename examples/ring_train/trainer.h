#pragma once
// One rank of the training loop: input, forward, backward, gradient AllReduce,
// optional tensor-parallel collectives, optimizer, stream sync, result check.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "communicators.h"
#include "dataloader.h"
#include "model.h"
#include "train_options.h"

class Trainer {
 public:
  Trainer(const TrainOptions& options, Bootstrap& boot);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void run();

 private:
  void step(int step);
  void reduceGradients(int step);
  void runTensorParallel(int step);
  void misbehaveBeforeCollectives(int step);
  bool syncsEveryLayer() const;

  TrainOptions options_;
  Bootstrap& boot_;
  int rank_;
  int world_size_;
  cudaStream_t stream_ = nullptr;
  cudaGraph_t allreduce_graph_ = nullptr;
  cudaGraphExec_t allreduce_exec_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  ncclComm_t world_ = nullptr;
  TensorParallelGroup tp_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Dataloader> dataloader_;

  size_t grad_count_ = 0;
  float* grads_ = nullptr;
  std::vector<float> grads_host_;

  size_t tp_block_ = 0;  // elements per member in the TP collectives
  float* tp_shard_ = nullptr;
  float* tp_gathered_ = nullptr;
  float* tp_partials_ = nullptr;
  float* tp_reduced_ = nullptr;
  std::vector<float> tp_gathered_host_;
  std::vector<float> tp_reduced_host_;
};
