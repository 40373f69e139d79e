#include "ops/cuda/common.cuh"
#include "ops/cuda/spin.h"

namespace strata::cuda {

namespace {

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void launch_spin(int64_t cycles, void* stream) {
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<long long>(cycles));
  STRATA_CUDA_LAUNCH_CHECK();
}

}  // namespace strata::cuda
