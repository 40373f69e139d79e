#include "ops/cuda/take_ids.h"

#include <cuda_runtime.h>

namespace strata::cuda {
namespace {

__global__ void take_ids_kernel(int32_t* ids, const int32_t* src, int64_t T, const int32_t* prev,
                                int64_t P, int* index_errors) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int32_t s = src[t];
  if (s < 0) return;
  if (s >= P) {
    atomicAdd(index_errors, 1);
    return;
  }
  const int32_t id = prev[s];
  ids[t] = id < 0 ? 0 : id;  // a non-finite row's -1: its sequence ends; the row is discarded
}

}  // namespace

void launch_take_ids(int32_t* ids, const int32_t* src, int64_t T, const int32_t* prev, int64_t P,
                     int* index_errors, void* stream) {
  if (T == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((T + kThreads - 1) / kThreads);
  take_ids_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(ids, src, T, prev,
                                                                              P, index_errors);
}

}  // namespace strata::cuda
