// Device pieces shared by the routed-experts kernels (moe_experts.cu: decode and SIMT grouped
// paths; moe_grouped_mma.cu: the grouped GEMMs on the tensor cores): the scratch layout, the
// pair -> expert lookup, the expert scales and the up projection's epilogue.
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe.h"

namespace strata::cuda::moe {

constexpr int kTile = 64;  // grouped GEMM tile: sorted pairs per tile (both grouped paths)

struct Scratch {
  uint8_t* xq = nullptr;       // [pairs, H] e4m3 (W8A8)
  void* h = nullptr;           // [pairs, I] act, or e4m3 bytes in W8A8
  void* d = nullptr;           // [pairs, H] act (grouped)
  int32_t* counts = nullptr;   // [E]
  int32_t* offsets = nullptr;  // [E]
  int32_t* cursor = nullptr;   // [E]
  int32_t* sorted = nullptr;   // [pairs]
  int32_t* tiles = nullptr;    // [max_tiles, 2]: expert, first sorted row (-1: unused)
};

__device__ __forceinline__ int expert_of(const MoeExpertsLaunch& p, int64_t pair) {
  const int64_t t = pair / p.top_k, j = pair % p.top_k;
  return static_cast<const int32_t*>(p.ids.p)[t * p.ids.ld + j];
}
__device__ __forceinline__ bool valid_expert(const MoeExpertsLaunch& p, int e) {
  return e >= 0 && e < p.experts;
}

__device__ __forceinline__ float up_scale(const MoeExpertsLaunch& p, int e) {
  return p.w8a8 ? p.tables.up_scale[e] * p.tables.up_in[e] : p.tables.up_scale[e];
}
__device__ __forceinline__ float down_scale(const MoeExpertsLaunch& p, int e) {
  return p.w8a8 ? p.tables.down_scale[e] * p.tables.down_in[e] : p.tables.down_scale[e];
}

// The up projection's epilogue: h = act(relu(act(u))^2), stored as act or quantized for W8A8.
template <class TA>
__device__ __forceinline__ void store_hidden(const MoeExpertsLaunch& p, const Scratch& s, int e,
                                             int64_t pair, int64_t i, float u) {
  const float ua = fmaxf(round_to<TA>(u), 0.f);
  const float h = round_to<TA>(ua * ua);
  if (p.w8a8)
    static_cast<uint8_t*>(s.h)[pair * p.inter + i] = f32_to_fp8_sat(h / p.tables.down_in[e]);
  else
    static_cast<TA*>(s.h)[pair * p.inter + i] = from_f32<TA>(h);
}

// The tensor-core grouped GEMMs (moe_grouped_mma.cu) over the bucketed pairs: up (h written
// through store_hidden) then down (d written per pair). Needs moe_mma_shape_ok (moe.h).
void launch_grouped_mma(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                        cudaStream_t stream);
// The same GEMMs with the weights on mma's M side, streamed to registers (moe_grouped_swap.cu):
// for few pairs per expert. Same shape requirements.
void launch_grouped_swap(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                         cudaStream_t stream);

}  // namespace strata::cuda::moe
