// Launchers of the MoE ops: routing (sigmoid scores, biased group-limited top-k, renormalized
// weights) and the routed experts as one grouped computation on the device.
#pragma once

#include <string>

#include "ops/cuda/device_views.h"

namespace strata::cuda {

struct MoeRouteLaunch {
  Mat logits;                   // [T, E] f32
  const float* bias = nullptr;  // [E] f32
  int64_t top_k = 1, n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  Mat ids, weights;  // [T, top_k] i32, f32
};
void launch_moe_route(const MoeRouteLaunch& p, void* stream);
// One warp per token (`cuda.warp`): up to 32 x kRouteWarpMaxPerLane experts, top_k <= 32, no
// group masking (n_group 1, or every group kept). Same ids and weights as launch_moe_route.
constexpr int64_t kRouteWarpMaxPerLane = 8;
bool moe_route_warp_fits(const MoeRouteLaunch& p);
void launch_moe_route_warp(const MoeRouteLaunch& p, void* stream);

// The experts' weights as device tables (built once per expert list by the registration).
struct ExpertTables {
  const void* const* up = nullptr;    // [E] pointers to [I, H]
  const void* const* down = nullptr;  // [E] pointers to [H, I]
  const float* up_scale = nullptr;    // [E] weight_scale (1 for bf16/f32 weights)
  const float* up_in = nullptr;       // [E] input_scale (W8A8 only)
  const float* down_scale = nullptr;
  const float* down_in = nullptr;
};

// Variants of the swapped grouped GEMMs (moe_grouped_swap.cu), bit flags: the L2 256-byte
// prefetch hint on the weight copies, and e4m3 -> f16 by the cvt instruction instead of integer
// operations. Registered (moe_kernels.cpp): kSwapL2Cvt as cuda.grouped_swap_cvt (first), 0 as
// cuda.grouped_swap (the first version, for A/B runs).
constexpr int kSwapL2Prefetch = 1;
constexpr int kSwapCvt = 2;
constexpr int kSwapL2Cvt = kSwapL2Prefetch | kSwapCvt;
// Split-K: a block's four warps in two groups of two, a group 32 output features, each warp half
// of the k-blocks (summed in shared memory): 2x the blocks of half the work, for few tiles (a
// batched decode step). Registered as cuda.grouped_swap_split.
constexpr int kSwapSplitK = 4;
constexpr int kSwapL2CvtSplit = kSwapL2Cvt | kSwapSplitK;

struct MoeExpertsLaunch {
  Mat x;                                                  // [T, H] act
  int64_t experts = 0, inter = 0, hidden = 0, top_k = 0;  // E, I, H, k
  DType wt = DType::BF16;                                 // every expert's weight dtype
  bool w8a8 = false;  // e4m3 weights with input scales: activations quantized per expert
  bool vec_up = false, vec_down = false;  // every weight row 16-byte aligned (chunked loads)
  bool mma = false;      // grouped path: GEMMs on the tensor cores (moe_mma_unsupported == "")
  bool swap = false;     // ... with the weights on mma's M side (few pairs per expert; needs mma)
  int swap_variant = 0;  // kSwap* flags (swap only)
  ExpertTables tables;
  Mat ids, weights;  // [T, k] i32, f32
  Mat out;           // [T, H] act
  // Scratch (sizes from moe_scratch_bytes): quantized inputs, hidden activations, per-pair
  // down outputs and the bucketing tables (grouped path).
  void* scratch = nullptr;
};

int64_t moe_max_tiles(int64_t pairs, int64_t experts);
size_t moe_scratch_bytes(const MoeExpertsLaunch& p, bool grouped);
// T <= 8: per (token, expert) matrix-vector products, combine fused into the down projection.
void launch_moe_gemv(const MoeExpertsLaunch& p, int* index_errors, void* stream);
// Why the grouped GEMMs cannot run on the tensor cores for these arguments ("" when they can):
// bf16 activations with bf16 or e4m3 W8A8 experts, H and I multiples of 16, 16-byte aligned
// rows of x and of every expert's weights.
std::string moe_mma_unsupported(const MoeExpertsLaunch& p);
// Any T: pairs bucketed by expert on the device, tiled GEMMs per expert (tensor cores when
// p.mma), weighted combine.
void launch_moe_grouped(const MoeExpertsLaunch& p, int* index_errors, void* stream);

// T <= 8 with e4m3 experts (moe_fp8_decode.cu): the FP8 GEMV core per (pair, 16-row tile) for
// both projections, x quantized inside the up blocks (W8A8), the weighted combine done by the
// last down block of each token's feature tile. Needs x bf16 with 16-byte aligned rows,
// H % 16 == 0, I % 16 == 0, 16-byte aligned expert weights, and one staged row of x and of h
// within fp8_gemv_max_stage_bytes() (moe_fp8_stage_bytes).
size_t moe_fp8_scratch_bytes(const MoeExpertsLaunch& p);
int64_t moe_fp8_stage_bytes(int64_t K, bool w8a8);
void launch_moe_fp8_decode(const MoeExpertsLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
