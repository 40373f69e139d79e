// Launchers of the causal depthwise conv1d + SiLU (Mamba2 xBC path): prefill over packed
// sequences with conv-state read and write-back, and the one-token decode update.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

constexpr int kMaxConvWidth = 16;

struct Conv1dLaunch {
  Mat x;                               // [T, C] act (raw xBC rows)
  const void* weight = nullptr;        // [C, K] act
  const void* bias = nullptr;          // [C] act
  void* states = nullptr;              // [S, K-1, C] act
  int64_t num_slots = 0, width = 0;    // S, K
  Vec cu_seqlens, slots, has_initial;  // i32 ([B+1], [B], [B]); has_initial unused by update
  Mat out;                             // [T, C] act
  // Prefill, bf16 runs: load the run's x rows before computing (false: each token's row at its
  // step, the kernel before branch ops4; for A/B, STRATA_CUDA_DISABLE_KERNELS=
  // conv1d_prefill:cuda.preload).
  bool preload = true;
};

void launch_conv1d_prefill(const Conv1dLaunch& p, int* index_errors, void* stream);
void launch_conv1d_update(const Conv1dLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
