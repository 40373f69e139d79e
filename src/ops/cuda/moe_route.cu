// MoE routing, one block per token: s = sigmoid(logits); sel = s + bias chooses, s weighs.
// With n_group > 1 only the topk_group groups with the largest sum of their two best sel stay.
// top-k by repeated block argmax (ties: lower index), so ids come out best first.
#include "ops/cuda/common.cuh"
#include "ops/cuda/moe.h"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

// Better of (v, i) and (w, j): larger value, then lower index.
__device__ __forceinline__ void arg_better(float& v, int& i, float w, int j) {
  if (w > v || (w == v && j < i)) {
    v = w;
    i = j;
  }
}

// Block argmax of vals[0..n) (every thread gets it); `sv`/`si` hold 32 entries each.
__device__ int block_argmax(const float* vals, int n, float* sv, int* si) {
  float v = -INFINITY;
  int i = n;
  for (int e = threadIdx.x; e < n; e += blockDim.x)
    arg_better(v, i, vals[e], e);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    const int j = __shfl_xor_sync(0xffffffffu, i, o);
    arg_better(v, i, w, j);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  v = lane < nw ? sv[lane] : -INFINITY;
  i = lane < nw ? si[lane] : n;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    const int j = __shfl_xor_sync(0xffffffffu, i, o);
    arg_better(v, i, w, j);
  }
  return i;
}

__global__ void moe_route_kernel(MoeRouteLaunch p) {
  pdl_enter();
  extern __shared__ float sh[];
  const int E = static_cast<int>(p.logits.cols), k = static_cast<int>(p.top_k);
  const int G = static_cast<int>(p.n_group);
  float* s = sh;                              // [E] sigmoid scores
  float* sel = s + E;                         // [E] selection scores (masked as experts are taken)
  float* gscore = sel + E;                    // [G]
  float* sv = gscore + G;                     // [32]
  int* si = reinterpret_cast<int*>(sv + 32);  // [32]
  int* picked = si + 32;                      // [k]
  int* gkeep = picked + k;                    // [G]
  const int64_t t = blockIdx.x;
  const float* lg = static_cast<const float*>(p.logits.p) + t * p.logits.ld;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    s[e] = sigmoidf_(lg[e]);
    sel[e] = s[e] + p.bias[e];
  }
  __syncthreads();
  if (G > 1) {
    const int gs = E / G;
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      float a = -INFINITY, b = -INFINITY;  // two largest of the group
      for (int e = g * gs; e < (g + 1) * gs; ++e) {
        const float v = sel[e];
        if (v > a) {
          b = a;
          a = v;
        } else if (v > b) {
          b = v;
        }
      }
      gscore[g] = a + b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // Keep the topk_group best groups (ties: lower index).
      for (int g = 0; g < G; ++g)
        gkeep[g] = 0;
      for (int r = 0; r < p.topk_group && r < G; ++r) {
        int best = -1;
        for (int g = 0; g < G; ++g)
          if (!gkeep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        gkeep[best] = 1;
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (!gkeep[e / gs]) sel[e] = -INFINITY;
    __syncthreads();
  }
  for (int j = 0; j < k; ++j) {
    const int best = block_argmax(sel, E, sv, si);
    if (threadIdx.x == 0) {
      picked[j] =
          best < E ? best : 0;  // fewer candidates than k: a config error caught on the host
      if (best < E) sel[best] = -INFINITY;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int j = 0; j < k; ++j)
      sum += s[picked[j]];
    int32_t* ids = static_cast<int32_t*>(p.ids.p) + t * p.ids.ld;
    float* w = static_cast<float*>(p.weights.p) + t * p.weights.ld;
    for (int j = 0; j < k; ++j) {
      float v = s[picked[j]];
      if (p.norm_topk_prob) v = v / sum;
      ids[j] = picked[j];
      w[j] = v * p.routed_scaling_factor;
    }
  }
}

// One warp per token, kRouteWarpBlock / 32 tokens per block, for one group (or every group
// kept): lane l holds experts l, l + 32, ... (PER_LANE of them) in registers; top-k by k warp
// argmax rounds over shuffles, with the block kernel's order (larger value, then lower index)
// and weights (the sum of the picked scores in pick order). Lane j keeps pick j and writes it.
// The block kernel spends two block barriers per pick on 256 threads for 128 experts.
constexpr int kRouteWarpBlock = 128;

template <int PER_LANE>
__global__ void __launch_bounds__(kRouteWarpBlock) moe_route_warp_kernel(MoeRouteLaunch p) {
  pdl_enter();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (kRouteWarpBlock / 32) + (threadIdx.x >> 5);
  if (t >= p.logits.rows) return;  // the whole warp
  const int lane = threadIdx.x & 31;
  const int E = static_cast<int>(p.logits.cols), k = static_cast<int>(p.top_k);
  constexpr int kNone = 1 << 30;  // index of the padding lanes' entries: never better
  const float* lg = static_cast<const float*>(p.logits.p) + t * p.logits.ld;
  float s[PER_LANE], sel[PER_LANE];
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) {
    const int e = lane + 32 * j;
    s[j] = 0.f;
    sel[j] = -INFINITY;
    if (e < E) {
      s[j] = sigmoidf_(lg[e]);
      sel[j] = s[j] + p.bias[e];
    }
  }
  // No candidate left (a config error caught on the host): expert 0, as the block kernel.
  const float s0 = __shfl_sync(0xffffffffu, s[0], 0);
  int my_id = 0;
  float my_s = 0.f, sum = 0.f;
  for (int r = 0; r < k; ++r) {
    float v = -INFINITY, vs = 0.f;
    int i = kNone;
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
      const int e = lane + 32 * j;
      if (e < E && (sel[j] > v || (sel[j] == v && e < i))) {
        v = sel[j];
        i = e;
        vs = s[j];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v, o);
      const int jj = __shfl_xor_sync(0xffffffffu, i, o);
      const float ws = __shfl_xor_sync(0xffffffffu, vs, o);
      if (w > v || (w == v && jj < i)) {
        v = w;
        i = jj;
        vs = ws;
      }
    }
    const int best = i < E ? i : 0;
    if (i < E && (best & 31) == lane) {
#pragma unroll
      for (int j = 0; j < PER_LANE; ++j)
        if (j == (best >> 5)) sel[j] = -INFINITY;
    }
    const float picked_s = i < E ? vs : s0;
    sum += picked_s;  // the same value on every lane, in pick order
    if (lane == r) {
      my_id = best;
      my_s = picked_s;
    }
  }
  if (lane < k) {
    float v = my_s;
    if (p.norm_topk_prob) v = v / sum;
    static_cast<int32_t*>(p.ids.p)[t * p.ids.ld + lane] = my_id;
    static_cast<float*>(p.weights.p)[t * p.weights.ld + lane] = v * p.routed_scaling_factor;
  }
}

}  // namespace

bool moe_route_warp_fits(const MoeRouteLaunch& p) {
  return p.logits.cols <= 32 * kRouteWarpMaxPerLane && p.top_k <= 32 &&
         (p.n_group == 1 || p.topk_group == p.n_group);
}

void launch_moe_route_warp(const MoeRouteLaunch& p, void* stream) {
  if (p.logits.rows == 0) return;
  const unsigned blocks = grid_1d(p.logits.rows, kRouteWarpBlock / 32);
  auto s = static_cast<cudaStream_t>(stream);
  static_assert(kRouteWarpMaxPerLane == 8, "the dispatch below covers 4 and 8 per lane");
  if (p.logits.cols <= 128)
    launch_pdl(moe_route_warp_kernel<4>, dim3(blocks), dim3(kRouteWarpBlock), 0, s, p);
  else
    launch_pdl(moe_route_warp_kernel<8>, dim3(blocks), dim3(kRouteWarpBlock), 0, s, p);
  STRATA_CUDA_LAUNCH_CHECK();
}

void launch_moe_route(const MoeRouteLaunch& p, void* stream) {
  if (p.logits.rows == 0) return;
  const size_t smem = (2 * p.logits.cols + p.n_group + 32) * sizeof(float) +
                      (32 + p.top_k + p.n_group) * sizeof(int);
  launch_pdl(moe_route_kernel, dim3(static_cast<unsigned>(p.logits.rows)), dim3(kThreads), smem,
             static_cast<cudaStream_t>(stream), p);
  STRATA_CUDA_LAUNCH_CHECK();
}

}  // namespace strata::cuda
