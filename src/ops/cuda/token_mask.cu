#include "ops/cuda/token_mask.h"

#include <cuda_runtime.h>

namespace strata::cuda {
namespace {

// One thread per logit; grid.y = row. The mask word is shared by 32 neighbouring threads.
__global__ void token_mask_kernel(float* logits, int64_t row_stride, const uint32_t* mask,
                                  int64_t V, int64_t W, float masked) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= V) return;
  const int64_t b = blockIdx.y;
  const uint32_t word = mask[b * W + v / 32];
  if (((word >> (v % 32)) & 1u) == 0) logits[b * row_stride + v] = masked;
}

}  // namespace

void launch_token_mask(float* logits, int64_t row_stride, const uint32_t* mask, int64_t B,
                       int64_t V, float masked, void* stream) {
  if (B == 0 || V == 0) return;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((V + kThreads - 1) / kThreads), static_cast<unsigned>(B));
  token_mask_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, row_stride, mask, V, (V + 31) / 32, masked);
}

}  // namespace strata::cuda
