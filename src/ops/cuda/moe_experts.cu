// The routed experts. Per (token t, slot j) pair with expert e = ids[t, j]:
//   u = act(x[t] . W_up[e]^T * su);  h = act(relu(u)^2);  d = act(h . W_down[e]^T * sd)
//   out[t] = act(sum_j weights[t, j] * d_j)                  (sum in slot order, as the host)
// su, sd: weight_scale for e4m3 weights (times input_scale in W8A8, where x and h are first
// quantized with the expert's input scales), 1 otherwise.
// Decode path (few tokens): block matrix-vector products (gemv.cuh) per (token, expert) pair
// for both projections, then the combine pass. Grouped path (any T): pairs bucketed by expert on
// the device (count, scan, scatter), then tiled GEMMs that each read one expert's weight tile once
// for up to 64 of its tokens (on the tensor cores: moe_grouped_mma.cu, or on CUDA cores in f32
// for the other dtypes and shapes), and a combine pass.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "ops/cuda/gemv.cuh"
#include "ops/cuda/moe.h"
#include "ops/cuda/moe_common.cuh"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

using moe::down_scale;
using moe::expert_of;
using moe::kTile;
using moe::Scratch;
using moe::store_hidden;
using moe::up_scale;
using moe::valid_expert;

constexpr int kTileK = 16;

size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

Scratch carve(const MoeExpertsLaunch& p, bool grouped, size_t* total) {
  Scratch s;
  const int64_t pairs = p.x.rows * p.top_k, E = p.experts;
  const size_t act = dtype_size(p.x.dt);
  char* base = static_cast<char*>(p.scratch);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = base ? base + off : nullptr;
    off += align256(bytes);
    return ptr;
  };
  if (p.w8a8) s.xq = reinterpret_cast<uint8_t*>(take(static_cast<size_t>(pairs * p.hidden)));
  s.h = take(static_cast<size_t>(pairs * p.inter) * (p.w8a8 ? 1 : act));
  s.d = take(static_cast<size_t>(pairs * p.hidden) * act);
  if (grouped) {
    s.counts = reinterpret_cast<int32_t*>(take(static_cast<size_t>(E) * 4));
    s.offsets = reinterpret_cast<int32_t*>(take(static_cast<size_t>(E) * 4));
    s.cursor = reinterpret_cast<int32_t*>(take(static_cast<size_t>(E) * 4));
    s.sorted = reinterpret_cast<int32_t*>(take(static_cast<size_t>(pairs) * 4));
    s.tiles = reinterpret_cast<int32_t*>(take(static_cast<size_t>(moe_max_tiles(pairs, E)) * 8));
  }
  *total = off;
  return s;
}

// W8A8, bf16 x with 16-byte aligned rows and H % 8 == 0: the same, 8 values per thread (one
// 16-byte load, one 8-byte store). grid (pairs, ceil(H / 8 / 128)), 128 threads.
__device__ __forceinline__ void quantize_pair_vec8(const MoeExpertsLaunch& p, const Scratch& s,
                                                   int64_t pair, int64_t c) {
  const int e = expert_of(p, pair);
  if (!valid_expert(p, e)) return;
  const float in = p.tables.up_in[e];
  const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x.p) +
                                                  (pair / p.top_k) * p.x.ld + c);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t bits = (w[i / 2] >> (16 * (i % 2))) & 0xffffu;
    const float x = __uint_as_float(bits << 16);  // bf16 -> f32
    q[i / 4] |= static_cast<uint32_t>(f32_to_fp8_sat(x / in)) << (8 * (i % 4));
  }
  *reinterpret_cast<uint2*>(s.xq + pair * p.hidden + c) = make_uint2(q[0], q[1]);
}
__global__ void quantize_pairs_vec_kernel(MoeExpertsLaunch p, Scratch s) {
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c < p.hidden) quantize_pair_vec8(p, s, blockIdx.x, c);
}
bool quantize_vectorizable(const MoeExpertsLaunch& p) {
  return p.x.dt == DType::BF16 && p.hidden % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.x.p) % 16 == 0 && (p.x.rows == 1 || p.x.ld % 8 == 0);
}

// W8A8: xq[pair] = sat_e4m3(x[t] / up_in[e]). grid (pairs, ceil(H / 256)).
template <class TA>
__global__ void quantize_pairs_kernel(MoeExpertsLaunch p, Scratch s) {
  const int64_t pair = blockIdx.x, c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= p.hidden) return;
  const int e = expert_of(p, pair);
  if (!valid_expert(p, e)) return;
  const TA* x = static_cast<const TA*>(p.x.p) + (pair / p.top_k) * p.x.ld;
  s.xq[pair * p.hidden + c] = f32_to_fp8_sat(to_f32(x[c]) / p.tables.up_in[e]);
}

// ---- decode path ----

constexpr int kRows = 4;  // output features per decode block

// grid (ceil(I / 4), pairs): four hidden features of one (token, expert) pair per block.
template <class TA, class TW, bool Q, bool VEC>
__global__ void __launch_bounds__(kGemvWarps * 32)
    up_gemv_kernel(MoeExpertsLaunch p, Scratch s, int* errors) {
  __shared__ float red[kGemvWarps * kRows];
  __shared__ float res[kRows];
  const int64_t pair = blockIdx.y, i0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int e = expert_of(p, pair);
  if (!valid_expert(p, e)) {
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(errors, 1);
    return;
  }
  const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.inter - i0));
  const TW* w = static_cast<const TW*>(p.tables.up[e]) + i0 * p.hidden;
  if constexpr (Q)
    block_gemv<uint8_t, TW, 1, kRows, VEC>(s.xq + pair * p.hidden, p.hidden, 1, w, rows, p.hidden,
                                           red, res);
  else
    block_gemv<TA, TW, 1, kRows, VEC>(static_cast<const TA*>(p.x.p) + (pair / p.top_k) * p.x.ld,
                                      p.x.ld, 1, w, rows, p.hidden, red, res);
  if (threadIdx.x < rows)
    store_hidden<TA>(p, s, e, pair, i0 + threadIdx.x, res[threadIdx.x] * up_scale(p, e));
}

// grid (ceil(H / 4), pairs): four output features of one pair's down projection, stored in
// act (the combine kernel then weighs and sums the pairs of a token in slot order).
template <class TA, class TW, bool Q, bool VEC>
__global__ void __launch_bounds__(kGemvWarps * 32) down_gemv_kernel(MoeExpertsLaunch p, Scratch s) {
  using TH = typename std::conditional<Q, uint8_t, TA>::type;
  __shared__ float red[kGemvWarps * kRows];
  __shared__ float res[kRows];
  const int64_t pair = blockIdx.y, n0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int e = expert_of(p, pair);
  if (!valid_expert(p, e)) return;  // counted by the up kernel
  const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.hidden - n0));
  const TW* w = static_cast<const TW*>(p.tables.down[e]) + n0 * p.inter;
  const TH* h = static_cast<const TH*>(s.h) + pair * p.inter;
  block_gemv<TH, TW, 1, kRows, VEC>(h, p.inter, 1, w, rows, p.inter, red, res);
  if (threadIdx.x < rows)
    static_cast<TA*>(s.d)[pair * p.hidden + n0 + threadIdx.x] =
        from_f32<TA>(res[threadIdx.x] * down_scale(p, e));
}

// ---- grouped path ----

__global__ void count_kernel(MoeExpertsLaunch p, Scratch s, int64_t pairs, int* errors) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= pairs) return;
  const int e = expert_of(p, pair);
  if (valid_expert(p, e))
    atomicAdd(&s.counts[e], 1);
  else
    atomicAdd(errors, 1);
}

// One warp: offsets of each expert's rows in the sorted list and the tile table (experts in
// order, 32 at a time, by warp prefix sums of their row and tile counts).
__device__ __forceinline__ int32_t warp_inclusive_sum(int32_t v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}
// counts: [E] rows per expert; writes offsets and cursor (zeros): [E], tiles: [max_tiles, 2].
__device__ __forceinline__ void plan_warp(const MoeExpertsLaunch& p, const int32_t* counts,
                                          int32_t* offsets, int32_t* cursor, int32_t* tiles,
                                          int64_t max_tiles) {
  const int lane = threadIdx.x & 31;
  int32_t off = 0;   // rows of the experts before this chunk
  int64_t tile = 0;  // tiles of the experts before this chunk
  for (int e0 = 0; e0 < p.experts; e0 += 32) {
    const int e = e0 + lane;
    const int32_t count = e < p.experts ? counts[e] : 0, n_tiles = (count + kTile - 1) / kTile;
    const int32_t rows_incl = warp_inclusive_sum(count), tiles_incl = warp_inclusive_sum(n_tiles);
    if (e < p.experts) {
      const int32_t first = off + rows_incl - count;
      offsets[e] = first;
      cursor[e] = 0;
      const int64_t t0 = tile + tiles_incl - n_tiles;
      for (int32_t t = 0; t < n_tiles && t0 + t < max_tiles; ++t) {
        tiles[2 * (t0 + t)] = e;
        tiles[2 * (t0 + t) + 1] = first + t * kTile;
      }
    }
    off += __shfl_sync(0xffffffffu, rows_incl, 31);
    tile += __shfl_sync(0xffffffffu, tiles_incl, 31);
  }
  for (int64_t t = tile + lane; t < max_tiles; t += 32)
    tiles[2 * t] = -1;
}
__global__ void plan_kernel(MoeExpertsLaunch p, Scratch s, int64_t max_tiles) {
  if (blockIdx.x != 0 || threadIdx.x >= 32) return;
  plan_warp(p, s.counts, s.offsets, s.cursor, s.tiles, max_tiles);
}

__global__ void scatter_kernel(MoeExpertsLaunch p, Scratch s, int64_t pairs) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= pairs) return;
  const int e = expert_of(p, pair);
  if (!valid_expert(p, e)) return;
  // Order within an expert is arbitrary; each pair's row is computed independently of it.
  s.sorted[s.offsets[e] + atomicAdd(&s.cursor[e], 1)] = static_cast<int32_t>(pair);
}

// The bucketing in one launch for up to kFusedBucketMaxPairs pairs (instead of a memset and the
// count, plan and scatter kernels): block 0 counts, plans and scatters in its shared memory
// (3 x E int32, dynamic) and writes counts, offsets, tiles and sorted; with QUANT the other
// blocks quantize x for W8A8 (the vectorized quantize: 8 values per thread, pair-major), in the
// same launch. A batched decode step (T = 8: 48 pairs) or a 512-token prefill (3,072 pairs) then
// runs 2 small launches around the GEMMs (this one, the combine) instead of 6.
constexpr int64_t kFusedBucketMaxPairs = 8192;
constexpr int64_t kFusedBucketMaxExperts = 4096;  // 48 KB of shared memory
constexpr int kBucketThreads = 256;

template <bool QUANT>
__global__ void __launch_bounds__(kBucketThreads)
    bucket_kernel(MoeExpertsLaunch p, Scratch s, int64_t pairs, int64_t max_tiles, int* errors) {
  pdl_enter();
  if (blockIdx.x > 0) {
    if constexpr (QUANT) {
      const int64_t per_pair = p.hidden / 8;  // 8-value groups of a row (H % 8 == 0)
      const int64_t v = static_cast<int64_t>(blockIdx.x - 1) * kBucketThreads + threadIdx.x;
      if (v < pairs * per_pair) quantize_pair_vec8(p, s, v / per_pair, (v % per_pair) * 8);
    }
    return;
  }
  extern __shared__ int32_t bucket_smem[];
  int32_t* counts = bucket_smem;               // [E]
  int32_t* offsets = bucket_smem + p.experts;  // [E]
  int32_t* cursor = offsets + p.experts;       // [E]
  for (int64_t e = threadIdx.x; e < p.experts; e += kBucketThreads)
    counts[e] = 0;
  __syncthreads();
  for (int64_t pair = threadIdx.x; pair < pairs; pair += kBucketThreads) {
    const int e = expert_of(p, pair);
    if (valid_expert(p, e))
      atomicAdd(&counts[e], 1);
    else
      atomicAdd(errors, 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) plan_warp(p, counts, offsets, cursor, s.tiles, max_tiles);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < p.experts; e += kBucketThreads) {
    s.counts[e] = counts[e];
    s.offsets[e] = offsets[e];
  }
  for (int64_t pair = threadIdx.x; pair < pairs; pair += kBucketThreads) {
    const int e = expert_of(p, pair);
    if (valid_expert(p, e))
      s.sorted[offsets[e] + atomicAdd(&cursor[e], 1)] = static_cast<int32_t>(pair);
  }
}

// STRATA_MOE_FUSED_BUCKET=0 keeps the separate launches (A/B runs; read once).
bool fused_bucket_enabled() {
  static const bool v = [] {
    const char* e = std::getenv("STRATA_MOE_FUSED_BUCKET");
    return !(e && std::string(e) == "0");
  }();
  return v;
}

// grid (max_tiles, ceil(F / 64)), 256 threads, 4x4 outputs each: for the tile's pairs (rows)
// and features f0.. (columns), acc = A[pair] . W_e[f]. UP: A = x (or xq), W = up, epilogue h;
// DOWN: A = h, W = down, epilogue d.
template <class TA, class TW, bool Q, bool UP>
__global__ void __launch_bounds__(256) grouped_gemm_kernel(MoeExpertsLaunch p, Scratch s) {
  using TXe = typename std::conditional<Q, uint8_t, TA>::type;
  __shared__ float as[kTileK][kTile + 4];
  __shared__ __align__(16) float bs[kTileK][kTile + 4];
  const int e = s.tiles[2 * blockIdx.x];
  if (e < 0) return;
  const int32_t row0 = s.tiles[2 * blockIdx.x + 1];
  const int32_t rows = min(kTile, s.offsets[e] + s.counts[e] - row0);
  const int64_t K = UP ? p.hidden : p.inter, F = UP ? p.inter : p.hidden;
  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const TW* W = static_cast<const TW*>(UP ? p.tables.up[e] : p.tables.down[e]);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // Loader mapping: 64 rows x 16 k per operand, 4 elements per thread, k fastest.
  const int lk = threadIdx.x % kTileK, lr = threadIdx.x / kTileK;  // lr: 0..15, rows lr + 16 m
  const TXe* arow[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int r = lr + 16 * m;
    arow[m] = nullptr;
    if (r < rows) {
      const int64_t pair = s.sorted[row0 + r];
      if (UP && !Q)
        arow[m] =
            reinterpret_cast<const TXe*>(static_cast<const TA*>(p.x.p) + (pair / p.top_k) * p.x.ld);
      else if (UP)
        arow[m] = reinterpret_cast<const TXe*>(s.xq + pair * p.hidden);
      else
        arow[m] = static_cast<const TXe*>(s.h) + pair * p.inter;
    }
  }
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
    const int64_t k = k0 + lk;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int r = lr + 16 * m;
      as[lk][r] = (arow[m] && k < K) ? elem_f32(arow[m][k]) : 0.f;
      const int64_t f = f0 + r;
      bs[lk][r] = (f < F && k < K) ? elem_f32(W[f * K + k]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        a[i] = as[kk][ty * 4 + i];
      const float4 b = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[i][0] = fmaf(a[i], b.x, acc[i][0]);
        acc[i][1] = fmaf(a[i], b.y, acc[i][1]);
        acc[i][2] = fmaf(a[i], b.z, acc[i][2]);
        acc[i][3] = fmaf(a[i], b.w, acc[i][3]);
      }
    }
    __syncthreads();
  }
  const float scale = UP ? up_scale(p, e) : down_scale(p, e);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty * 4 + i;
    if (r >= rows) continue;
    const int64_t pair = s.sorted[row0 + r];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t f = f0 + tx * 4 + j;
      if (f >= F) continue;
      if (UP)
        store_hidden<TA>(p, s, e, pair, f, acc[i][j] * scale);
      else
        static_cast<TA*>(s.d)[pair * p.hidden + f] = from_f32<TA>(acc[i][j] * scale);
    }
  }
}

// grid (T, ceil(H / 256)): out[t] = act(sum_j weights[t, j] * d[t*k + j]) over valid experts.
template <class TA>
__global__ void combine_kernel(MoeExpertsLaunch p, Scratch s) {
  pdl_enter();
  const int64_t t = blockIdx.x, n = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (n >= p.hidden) return;
  const int32_t* ids = static_cast<const int32_t*>(p.ids.p) + t * p.ids.ld;
  const float* wts = static_cast<const float*>(p.weights.p) + t * p.weights.ld;
  float sum = 0.f;
  for (int64_t j = 0; j < p.top_k; ++j) {
    if (!valid_expert(p, ids[j])) continue;
    sum += wts[j] * to_f32(static_cast<const TA*>(s.d)[(t * p.top_k + j) * p.hidden + n]);
  }
  static_cast<TA*>(p.out.p)[t * p.out.ld + n] = from_f32<TA>(sum);
}

// bf16 with H % 8 == 0 and 16-byte aligned rows of out: the same sums, 8 features per thread
// (16-byte loads of d and one 16-byte store). grid (T, ceil(H / 8 / 128)), 128 threads.
__global__ void combine_vec_kernel(MoeExpertsLaunch p, Scratch s) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t n = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (n >= p.hidden) return;
  const int32_t* ids = static_cast<const int32_t*>(p.ids.p) + t * p.ids.ld;
  const float* wts = static_cast<const float*>(p.weights.p) + t * p.weights.ld;
  float sum[8] = {};
  for (int64_t j = 0; j < p.top_k; ++j) {
    if (!valid_expert(p, ids[j])) continue;
    const float w = wts[j];
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(s.d) +
                                                    (t * p.top_k + j) * p.hidden + n);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      sum[i] += w * __uint_as_float(((words[i / 2] >> (16 * (i % 2))) & 0xffffu) << 16);
  }
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    o[i] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(sum[2 * i]))) |
           static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(sum[2 * i + 1]))) << 16;
  *reinterpret_cast<uint4*>(static_cast<bf16*>(p.out.p) + t * p.out.ld + n) =
      make_uint4(o[0], o[1], o[2], o[3]);
}
bool combine_vectorizable(const MoeExpertsLaunch& p) {
  return p.x.dt == DType::BF16 && p.hidden % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.out.p) % 16 == 0 && (p.x.rows == 1 || p.out.ld % 8 == 0);
}

// Calls f(TA{}, TW{}, Q) for the launch's dtypes (combinations checked by the registration).
template <class F>
void with_expert_types(const MoeExpertsLaunch& p, F&& f) {
  if (p.x.dt == DType::F32 && p.wt == DType::F32)
    f(float{}, float{}, std::false_type{});
  else if (p.x.dt == DType::BF16 && p.wt == DType::BF16)
    f(bf16{}, bf16{}, std::false_type{});
  else if (p.x.dt == DType::BF16 && p.wt == DType::F8E4M3 && p.w8a8)
    f(bf16{}, uint8_t{}, std::true_type{});
  else if (p.x.dt == DType::BF16 && p.wt == DType::F8E4M3)
    f(bf16{}, uint8_t{}, std::false_type{});
  else
    STRATA_CUDA_FAIL("moe_experts: unsupported activation/weight dtypes (checked in supports)");
}

}  // namespace

// Tiles = sum over the n used experts of ceil(count / kTile) <= (pairs + n (kTile - 1)) / kTile,
// n <= min(experts, pairs) (a decode step: 48 pairs give 48 tiles, not 126).
int64_t moe_max_tiles(int64_t pairs, int64_t experts) {
  return (pairs + std::min(experts, pairs) * (kTile - 1)) / kTile;
}

size_t moe_scratch_bytes(const MoeExpertsLaunch& p, bool grouped) {
  size_t total = 0;
  MoeExpertsLaunch q = p;
  q.scratch = nullptr;
  (void)carve(q, grouped, &total);
  return total;
}

void launch_moe_gemv(const MoeExpertsLaunch& p, int* index_errors, void* stream) {
  const int64_t T = p.x.rows, pairs = T * p.top_k;
  if (T == 0) return;
  size_t total = 0;
  const Scratch s = carve(p, false, &total);
  auto st = static_cast<cudaStream_t>(stream);
  with_expert_types(p, [&](auto ta, auto tw, auto q) {
    using TA = decltype(ta);
    using TW = decltype(tw);
    constexpr bool Q = decltype(q)::value;
    if constexpr (Q) {
      quantize_pairs_kernel<TA>
          <<<dim3(static_cast<unsigned>(pairs), grid_1d(p.hidden, 256)), 256, 0, st>>>(p, s);
      STRATA_CUDA_LAUNCH_CHECK();
    }
    dim3 g_up(static_cast<unsigned>((p.inter + kRows - 1) / kRows), static_cast<unsigned>(pairs));
    if (p.vec_up)
      up_gemv_kernel<TA, TW, Q, true><<<g_up, kGemvWarps * 32, 0, st>>>(p, s, index_errors);
    else
      up_gemv_kernel<TA, TW, Q, false><<<g_up, kGemvWarps * 32, 0, st>>>(p, s, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
    dim3 g_down(static_cast<unsigned>((p.hidden + kRows - 1) / kRows),
                static_cast<unsigned>(pairs));
    if (p.vec_down)
      down_gemv_kernel<TA, TW, Q, true><<<g_down, kGemvWarps * 32, 0, st>>>(p, s);
    else
      down_gemv_kernel<TA, TW, Q, false><<<g_down, kGemvWarps * 32, 0, st>>>(p, s);
    STRATA_CUDA_LAUNCH_CHECK();
    combine_kernel<TA>
        <<<dim3(static_cast<unsigned>(T), grid_1d(p.hidden, 256)), 256, 0, st>>>(p, s);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_moe_grouped(const MoeExpertsLaunch& p, int* index_errors, void* stream) {
  const int64_t T = p.x.rows, pairs = T * p.top_k;
  if (T == 0) return;
  size_t total = 0;
  const Scratch s = carve(p, true, &total);
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t max_tiles = moe_max_tiles(pairs, p.experts);
  const bool fused = pairs <= kFusedBucketMaxPairs && p.experts <= kFusedBucketMaxExperts &&
                     fused_bucket_enabled();
  const bool fused_quant = fused && p.w8a8 && quantize_vectorizable(p);
  if (fused) {
    const size_t smem = static_cast<size_t>(p.experts) * 3 * sizeof(int32_t);
    if (fused_quant)
      launch_pdl(bucket_kernel<true>, dim3(1 + grid_1d(pairs * (p.hidden / 8), kBucketThreads)),
                 dim3(kBucketThreads), smem, st, p, s, pairs, max_tiles, index_errors);
    else
      launch_pdl(bucket_kernel<false>, dim3(1), dim3(kBucketThreads), smem, st, p, s, pairs,
                 max_tiles, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
  } else {
    STRATA_CUDA_CHECK(cudaMemsetAsync(s.counts, 0, static_cast<size_t>(p.experts) * 4, st));
    count_kernel<<<grid_1d(pairs, 256), 256, 0, st>>>(p, s, pairs, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
    plan_kernel<<<1, 32, 0, st>>>(p, s, max_tiles);
    STRATA_CUDA_LAUNCH_CHECK();
    scatter_kernel<<<grid_1d(pairs, 256), 256, 0, st>>>(p, s, pairs);
    STRATA_CUDA_LAUNCH_CHECK();
  }
  with_expert_types(p, [&](auto ta, auto tw, auto q) {
    using TA = decltype(ta);
    using TW = decltype(tw);
    constexpr bool Q = decltype(q)::value;
    if constexpr (Q) {
      if (fused_quant) {
        // done by the bucket kernel's other blocks
      } else if (quantize_vectorizable(p))
        quantize_pairs_vec_kernel<<<dim3(static_cast<unsigned>(pairs), grid_1d(p.hidden / 8, 128)),
                                    128, 0, st>>>(p, s);
      else
        quantize_pairs_kernel<TA>
            <<<dim3(static_cast<unsigned>(pairs), grid_1d(p.hidden, 256)), 256, 0, st>>>(p, s);
      STRATA_CUDA_LAUNCH_CHECK();
    }
    if (p.mma && p.swap) {
      moe::launch_grouped_swap(p, s, max_tiles, st);
    } else if (p.mma) {
      moe::launch_grouped_mma(p, s, max_tiles, st);
    } else {
      grouped_gemm_kernel<TA, TW, Q, true>
          <<<dim3(static_cast<unsigned>(max_tiles), grid_1d(p.inter, kTile)), 256, 0, st>>>(p, s);
      STRATA_CUDA_LAUNCH_CHECK();
      grouped_gemm_kernel<TA, TW, Q, false>
          <<<dim3(static_cast<unsigned>(max_tiles), grid_1d(p.hidden, kTile)), 256, 0, st>>>(p, s);
      STRATA_CUDA_LAUNCH_CHECK();
    }
    if (combine_vectorizable(p))
      launch_pdl(combine_vec_kernel, dim3(static_cast<unsigned>(T), grid_1d(p.hidden / 8, 128)),
                 dim3(128), 0, st, p, s);
    else
      launch_pdl(combine_kernel<TA>, dim3(static_cast<unsigned>(T), grid_1d(p.hidden, 256)),
                 dim3(256), 0, st, p, s);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
