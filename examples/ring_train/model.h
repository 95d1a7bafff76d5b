#pragma once
// An L-layer MLP whose forward and backward passes are cuBLAS GEMMs on one stream:
// forward A[l+1] = W[l] A[l]; backward dgrad dA[l] = W[l]^T dA[l+1] and
// wgrad dW[l] = dA[l+1] A[l]^T. The numbers do not matter, the launch pattern does.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "kernels.h"

struct ModelShape {
  int layers = 1;
  int hidden = 1;
  int batch = 1;
  DType dtype = DType::F32;
};

class Model {
 public:
  Model(ModelShape shape, cudaStream_t stream, cublasHandle_t cublas, int seed);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Device buffer the batch is copied into.
  void* input() const { return activations_.front(); }
  size_t inputBytes() const;

  // `sync_every_layer` adds a cudaDeviceSynchronize after each layer's GEMMs, the
  // needless host/device serialisation found in real training code.
  void forward(bool sync_every_layer);
  void backward(bool sync_every_layer);

  // `count` more GEMMs of a layer's forward shape, into a scratch buffer: the work a heavier
  // layer, an extra head or a longer optimizer step adds.
  void extraGemms(int count);

  float* masterWeights() const { return master_; }
  size_t masterWeightCount() const;

 private:
  void gemm(cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k, const void* a, int lda,
            const void* b, int ldb, void* c, int ldc);
  void* deviceAlloc(size_t elements, DType dtype);

  ModelShape shape_;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  std::vector<void*> weights_;      // layers x (hidden x hidden)
  std::vector<void*> weight_grads_; // layers x (hidden x hidden)
  std::vector<void*> activations_;  // layers + 1 x (hidden x batch)
  std::vector<void*> act_grads_;    // 2 x (hidden x batch), ping-pong
  float* master_ = nullptr;         // fp32 copy the optimizer updates
  void* scratch_ = nullptr;         // hidden x batch, what extraGemms writes
  std::vector<void*> owned_;
};
