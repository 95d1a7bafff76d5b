// libtrainshim: the GPU side of train.py. Python reaches CUDA, cuBLAS and NCCL only
// through these functions, whose own calls go through the PLT, so an LD_PRELOADed
// watchdog sees them (ctypes.CDLL(lib).sym would bind inside the library instead).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "model.h"
#include "communicators.h"
#include "gpu_check.h"
#include "kernels.h"
#include "patterns.h"

namespace {

struct ShimState {
  std::unique_ptr<Bootstrap> boot;
  int rank = 0;
  int world_size = 1;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  ncclComm_t world = nullptr;
  std::unique_ptr<Model> model;
  size_t grad_count = 0;
  float* grads = nullptr;
  std::vector<float> grads_host;
};

ShimState* state = nullptr;

constexpr float kLearningRate = 1e-6f;

}  // namespace

extern "C" {

// MPI, device, stream, cuBLAS handle, world communicator and buffers. Returns the rank.
int shim_init(int layers, int hidden, int batch, double grad_mb) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  state = new ShimState;
  state->boot = mpiBootstrap();
  state->rank = state->boot->rank();
  state->world_size = state->boot->size();
  CheckIdentity::program = "python_train";
  CheckIdentity::rank = state->rank;
  CheckIdentity::bootstrap = state->boot.get();

  selectDevice(*state->boot);

  CUDA_CHECK(cudaStreamCreate(&state->stream));
  CUBLAS_CHECK(cublasCreate(&state->cublas));
  CUBLAS_CHECK(cublasSetStream(state->cublas, state->stream));
  state->world = joinWorld(*state->boot);
  state->model = std::make_unique<Model>(ModelShape{layers, hidden, batch, DType::F32}, state->stream,
                                         state->cublas, state->rank + 1);
  state->grad_count = std::max<size_t>(1, static_cast<size_t>(grad_mb * 1024 * 1024 / sizeof(float)));
  void* grads = nullptr;
  CUDA_CHECK(cudaMalloc(&grads, state->grad_count * sizeof(float)));
  state->grads = static_cast<float*>(grads);
  state->grads_host.resize(state->grad_count);
  return state->rank;
}

int shim_world_size() { return state->world_size; }

// Copies one batch (batch x hidden fp32 values) to the device and runs forward and backward.
void shim_forward_backward(const float* batch, size_t count, int sync_every_layer) {
  const size_t bytes = std::min(count * sizeof(float), state->model->inputBytes());
  CUDA_CHECK(cudaMemcpyAsync(state->model->input(), batch, bytes, cudaMemcpyHostToDevice, state->stream));
  state->model->forward(sync_every_layer != 0);
  state->model->backward(sync_every_layer != 0);
}

// Packs this step's gradient bucket and sums it over all ranks.
void shim_allreduce_grads(int step) {
  CUDA_CHECK(launchFillPattern(state->grads, state->grad_count, Pattern::Gradient, state->rank, step, 0,
                               state->stream));
  NCCL_CHECK(ncclAllReduce(state->grads, state->grads, state->grad_count, ncclFloat32, ncclSum, state->world,
                           state->stream));
}

// An AllGather over the gradient bucket where the others AllReduce: a collective mismatch.
void shim_allgather(int step) {
  CUDA_CHECK(launchFillPattern(state->grads, state->grad_count, Pattern::Gradient, state->rank, step, 0,
                               state->stream));
  const size_t per_rank = state->grad_count / state->world_size;
  NCCL_CHECK(ncclAllGather(state->grads + state->rank * per_rank, state->grads, per_rank, ncclFloat32,
                           state->world, state->stream));
}

void shim_optimizer_step() {
  CUDA_CHECK(launchSgdUpdate(state->model->masterWeights(), state->grads,
                             std::min(state->grad_count, state->model->masterWeightCount()), kLearningRate,
                             state->stream));
}

// Brings the reduced gradients back to the host and waits for the stream.
void shim_sync() {
  CUDA_CHECK(cudaMemcpyAsync(state->grads_host.data(), state->grads, state->grad_count * sizeof(float),
                             cudaMemcpyDeviceToHost, state->stream));
  CUDA_CHECK(cudaStreamSynchronize(state->stream));
}

// Number of wrong AllReduce elements after shim_sync; the first one is reported through the out-parameters.
long shim_verify(int step, size_t* first_index, float* expected, float* got) {
  float period[17] = {};
  for (size_t i = 0; i < 17; ++i)
    for (int r = 0; r < state->world_size; ++r) period[i] += patternValue(Pattern::Gradient, r, step, i);
  long errors = 0;
  for (size_t i = 0; i < state->grad_count; ++i) {
    if (state->grads_host[i] == period[i % 17]) continue;
    if (errors++ == 0) {
      *first_index = i;
      *expected = period[i % 17];
      *got = state->grads_host[i];
    }
  }
  return errors;
}

void shim_barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void shim_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void shim_finalize() {
  state->model.reset();
  cudaFree(state->grads);
  ncclCommDestroy(state->world);
  cublasDestroy(state->cublas);
  cudaStreamDestroy(state->stream);
  delete state;
  state = nullptr;
  MPI_Finalize();
}

}  // extern "C"
