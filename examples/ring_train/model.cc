#include "model.h"

#include "gpu_check.h"

Model::Model(ModelShape shape, cudaStream_t stream, cublasHandle_t cublas, int seed)
    : shape_(shape), stream_(stream), cublas_(cublas) {
  const size_t square = static_cast<size_t>(shape_.hidden) * shape_.hidden;
  const size_t act = static_cast<size_t>(shape_.hidden) * shape_.batch;
  for (int l = 0; l < shape_.layers; ++l) {
    weights_.push_back(deviceAlloc(square, shape_.dtype));
    CUDA_CHECK(launchInitWeights(weights_.back(), square, shape_.dtype, static_cast<uint32_t>(seed * 131 + l),
                                 stream_));
    weight_grads_.push_back(deviceAlloc(square, shape_.dtype));
  }
  for (int l = 0; l <= shape_.layers; ++l) activations_.push_back(deviceAlloc(act, shape_.dtype));
  for (int i = 0; i < 2; ++i) act_grads_.push_back(deviceAlloc(act, shape_.dtype));
  scratch_ = deviceAlloc(act, shape_.dtype);
  master_ = static_cast<float*>(deviceAlloc(masterWeightCount(), DType::F32));
  CUDA_CHECK(launchInitWeights(master_, masterWeightCount(), DType::F32, static_cast<uint32_t>(seed), stream_));
}

Model::~Model() {
  for (void* p : owned_) cudaFree(p);
}

size_t Model::inputBytes() const {
  return static_cast<size_t>(shape_.hidden) * shape_.batch * dtypeBytes(shape_.dtype);
}

size_t Model::masterWeightCount() const {
  return static_cast<size_t>(shape_.layers) * shape_.hidden * shape_.hidden;
}

void* Model::deviceAlloc(size_t elements, DType dtype) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, elements * dtypeBytes(dtype)));
  owned_.push_back(p);
  return p;
}

void Model::gemm(cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k, const void* a, int lda,
                 const void* b, int ldb, void* c, int ldc) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const cudaDataType_t type = shape_.dtype == DType::F32 ? CUDA_R_32F : CUDA_R_16F;
  CUBLAS_CHECK(cublasGemmEx(cublas_, trans_a, trans_b, m, n, k, &alpha, a, type, lda, b, type, ldb, &beta, c, type,
                            ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Model::forward(bool sync_every_layer) {
  const int h = shape_.hidden;
  const int b = shape_.batch;
  for (int l = 0; l < shape_.layers; ++l) {
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, h, b, h, weights_[l], h, activations_[l], h, activations_[l + 1], h);
    if (sync_every_layer) CUDA_CHECK(cudaDeviceSynchronize());
  }
}

void Model::backward(bool sync_every_layer) {
  const int h = shape_.hidden;
  const int b = shape_.batch;
  // The loss gradient is the output itself: dL/dA[L] = A[L] for L = 0.5 |A[L]|^2.
  const void* upstream = activations_.back();
  for (int l = shape_.layers - 1; l >= 0; --l) {
    void* downstream = act_grads_[l % 2];
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, h, b, h, weights_[l], h, upstream, h, downstream, h);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, h, h, b, upstream, h, activations_[l], h, weight_grads_[l], h);
    if (sync_every_layer) CUDA_CHECK(cudaDeviceSynchronize());
    upstream = downstream;
  }
}

void Model::extraGemms(int count) {
  const int h = shape_.hidden;
  const int b = shape_.batch;
  for (int i = 0; i < count; ++i) {
    const size_t l = static_cast<size_t>(i) % weights_.size();
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, h, b, h, weights_[l], h, activations_[l], h, scratch_, h);
  }
}
