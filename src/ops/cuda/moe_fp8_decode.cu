// The routed experts at decode (T <= 8) with e4m3 experts, on the FP8 GEMV core
// (linear_fp8_mma.cuh). Per (token t, slot j) pair with expert e = ids[t, j]:
//   up:   grid (16-row tiles of I, pairs). x[t] is staged per block (W8A8: quantized with the
//         expert's input scale, so no separate quantize pass), u = act(x . W_up[e]^T * su),
//         h = act(relu(u)^2), stored e4m3 (W8A8, with the down input scale) or bf16.
//   down: grid (16-row tiles of H, pairs). h[pair] is staged, d = act(h . W_down[e]^T * sd) goes
//         to scratch; the last of a token's top_k blocks of a feature tile (counted with an
//         atomic) adds out[t] = act(sum_j weights[t, j] * d_j) in slot order, as the host does.
// Two launches per layer; the up kernel also zeroes the down kernel's counters.
#include "ops/cuda/linear_fp8_mma.cuh"
#include "ops/cuda/moe.h"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

using fp8::BKind;

struct Fp8Scratch {
  void* h = nullptr;        // [pairs, I] e4m3 (W8A8) or bf16
  bf16* d = nullptr;        // [pairs, H]
  int32_t* done = nullptr;  // [T, feature tiles of H]: down blocks finished
};

__host__ __device__ int64_t feature_tiles(int64_t H) {
  return (H + fp8::kTileRows - 1) / fp8::kTileRows;
}

size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

Fp8Scratch carve(const MoeExpertsLaunch& p, size_t* total) {
  const int64_t pairs = p.x.rows * p.top_k;
  char* base = static_cast<char*>(p.scratch);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = base ? base + off : nullptr;
    off += align256(bytes);
    return ptr;
  };
  Fp8Scratch s;
  s.h = take(static_cast<size_t>(pairs * p.inter) * (p.w8a8 ? 1 : 2));
  s.d = reinterpret_cast<bf16*>(take(static_cast<size_t>(pairs * p.hidden) * 2));
  s.done =
      reinterpret_cast<int32_t*>(take(static_cast<size_t>(p.x.rows * feature_tiles(p.hidden)) * 4));
  *total = off;
  return s;
}

__device__ __forceinline__ int expert_at(const MoeExpertsLaunch& p, int64_t pair) {
  const int64_t t = pair / p.top_k, j = pair % p.top_k;
  return static_cast<const int32_t*>(p.ids.p)[t * p.ids.ld + j];
}
__device__ __forceinline__ bool valid_expert(const MoeExpertsLaunch& p, int e) {
  return e >= 0 && e < p.experts;
}

// grid (ceil(I / 16), pairs), dynamic shared memory: one staged x row (`stride` bytes).
template <BKind B, int U>
__global__ void __launch_bounds__(fp8::kThreads, fp8::min_blocks(1))
    fp8_up_kernel(const MoeExpertsLaunch p, const Fp8Scratch s, int64_t stride, int* errors) {
  pdl_enter();
  extern __shared__ __align__(16) uint8_t xs[];
  __shared__ fp8::TileRed<1> red;
  constexpr bool kW8A8 = B == BKind::E4M3;
  const int64_t pair = blockIdx.y, i0 = static_cast<int64_t>(blockIdx.x) * fp8::kTileRows;
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int64_t i = threadIdx.x; i < p.x.rows * feature_tiles(p.hidden); i += blockDim.x)
      s.done[i] = 0;
  const int e = expert_at(p, pair);
  if (!valid_expert(p, e)) {  // the whole block: e depends on blockIdx only
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(errors, 1);
    return;
  }
  const int64_t H = p.hidden, I = p.inter;
  const int rows = static_cast<int>(min(static_cast<int64_t>(fp8::kTileRows), I - i0));
  const fp8::TileRows w =
      fp8::tile_rows(static_cast<const uint8_t*>(p.tables.up[e]) + i0 * H, rows, H);
  int c0, c1;
  fp8::warp_chunks(H, c0, c1);
  uint4 alo[U], ahi[U];
  fp8::load_batch<U>(w, c0, c1, alo, ahi);  // in flight while x is staged
  const bf16* x = static_cast<const bf16*>(p.x.p) + (pair / p.top_k) * p.x.ld;
  fp8::stage_b<B, kW8A8>(x, p.x.ld, 1, H, kW8A8 ? p.tables.up_in[e] : 0.f, xs, stride);
  __syncthreads();
  float acc[1][4];
  fp8::warp_dot<B, 1, U>(w, c0, c1, alo, ahi, xs, stride, 1, acc);
  const float su = kW8A8 ? p.tables.up_scale[e] * p.tables.up_in[e] : p.tables.up_scale[e];
  fp8::tile_sum<1>(acc, red, rows, 1, [&](int r, int, float sum) {
    const float ua = fmaxf(round_to<bf16>(sum * su), 0.f);
    const float h = round_to<bf16>(ua * ua);
    const int64_t i = pair * I + i0 + r;
    if constexpr (kW8A8)
      static_cast<uint8_t*>(s.h)[i] = f32_to_fp8_sat(h / p.tables.down_in[e]);
    else
      static_cast<bf16*>(s.h)[i] = __float2bfloat16_rn(h);
  });
}

// grid (ceil(H / 16), pairs), dynamic shared memory: one staged h row (`stride` bytes).
template <BKind B, int U>
__global__ void __launch_bounds__(fp8::kThreads, fp8::min_blocks(1))
    fp8_down_kernel(const MoeExpertsLaunch p, const Fp8Scratch s, int64_t stride) {
  pdl_enter();
  extern __shared__ __align__(16) uint8_t hs[];
  __shared__ fp8::TileRed<1> red;
  __shared__ int last;
  constexpr bool kW8A8 = B == BKind::E4M3;
  const int64_t pair = blockIdx.y, t = pair / p.top_k;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * fp8::kTileRows;
  const int64_t H = p.hidden, I = p.inter;
  const int rows = static_cast<int>(min(static_cast<int64_t>(fp8::kTileRows), H - n0));
  const int e = expert_at(p, pair);
  if (valid_expert(p, e)) {  // block-uniform; invalid pairs were counted by the up kernel
    const fp8::TileRows w =
        fp8::tile_rows(static_cast<const uint8_t*>(p.tables.down[e]) + n0 * I, rows, I);
    int c0, c1;
    fp8::warp_chunks(I, c0, c1);
    uint4 alo[U], ahi[U];
    fp8::load_batch<U>(w, c0, c1, alo, ahi);
    if constexpr (kW8A8)
      fp8::stage_b<B, false>(static_cast<const uint8_t*>(s.h) + pair * I, I, 1, I, 0.f, hs, stride);
    else
      fp8::stage_b<B, false>(static_cast<const bf16*>(s.h) + pair * I, I, 1, I, 0.f, hs, stride);
    __syncthreads();
    float acc[1][4];
    fp8::warp_dot<B, 1, U>(w, c0, c1, alo, ahi, hs, stride, 1, acc);
    const float sd = kW8A8 ? p.tables.down_scale[e] * p.tables.down_in[e] : p.tables.down_scale[e];
    fp8::tile_sum<1>(acc, red, rows, 1, [&](int r, int, float sum) {
      s.d[pair * H + n0 + r] = __float2bfloat16_rn(sum * sd);
      __threadfence();  // visible to whichever block combines this tile
    });
  }
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&s.done[t * feature_tiles(H) + blockIdx.x], 1) == p.top_k - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other blocks' d before their counts
  if (threadIdx.x < rows) {
    const int32_t* ids = static_cast<const int32_t*>(p.ids.p) + t * p.ids.ld;
    const float* wts = static_cast<const float*>(p.weights.p) + t * p.weights.ld;
    const auto* d = reinterpret_cast<const unsigned short*>(s.d);
    float sum = 0.f;
    for (int64_t j = 0; j < p.top_k; ++j) {
      if (!valid_expert(p, ids[j])) continue;
      const unsigned short v = __ldcg(d + (t * p.top_k + j) * H + n0 + threadIdx.x);
      sum += wts[j] * __uint_as_float(static_cast<uint32_t>(v) << 16);
    }
    static_cast<bf16*>(p.out.p)[t * p.out.ld + n0 + threadIdx.x] = __float2bfloat16_rn(sum);
  }
}

constexpr size_t kStaticSmem = sizeof(fp8::TileRed<1>) + 16;  // + the down kernel's flag

template <auto Kernel>
void up(const MoeExpertsLaunch& p, const Fp8Scratch& s, dim3 grid, size_t smem, int64_t stride,
        int* errors, cudaStream_t st) {
  fp8::fit_smem<Kernel>(smem, kStaticSmem);
  launch_pdl(Kernel, grid, dim3(fp8::kThreads), smem, st, p, s, stride, errors);
  STRATA_CUDA_LAUNCH_CHECK();
}
template <auto Kernel>
void down(const MoeExpertsLaunch& p, const Fp8Scratch& s, dim3 grid, size_t smem, int64_t stride,
          cudaStream_t st) {
  fp8::fit_smem<Kernel>(smem, kStaticSmem);
  launch_pdl(Kernel, grid, dim3(fp8::kThreads), smem, st, p, s, stride);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <BKind B>
void launch_b(const MoeExpertsLaunch& p, const Fp8Scratch& s, int* errors, cudaStream_t st) {
  const unsigned pairs = static_cast<unsigned>(p.x.rows * p.top_k);
  const int64_t up_stride = fp8::stage_stride<B>(p.hidden),
                down_stride = fp8::stage_stride<B>(p.inter);
  const dim3 g_up(static_cast<unsigned>(feature_tiles(p.inter)), pairs);
  const dim3 g_down(static_cast<unsigned>(feature_tiles(p.hidden)), pairs);
  const size_t sm_up = static_cast<size_t>(up_stride), sm_down = static_cast<size_t>(down_stride);
  up<fp8_up_kernel<B, fp8::kBatch>>(p, s, g_up, sm_up, up_stride, errors, st);
  down<fp8_down_kernel<B, fp8::kBatch>>(p, s, g_down, sm_down, down_stride, st);
}

}  // namespace

size_t moe_fp8_scratch_bytes(const MoeExpertsLaunch& p) {
  size_t total = 0;
  MoeExpertsLaunch q = p;
  q.scratch = nullptr;
  (void)carve(q, &total);
  return total;
}

int64_t moe_fp8_stage_bytes(int64_t K, bool w8a8) {
  return w8a8 ? fp8::stage_stride<BKind::E4M3>(K) : fp8::stage_stride<BKind::BF16>(K);
}

void launch_moe_fp8_decode(const MoeExpertsLaunch& p, int* index_errors, void* stream) {
  if (p.x.rows == 0) return;
  if (p.wt != DType::F8E4M3 || p.x.dt != DType::BF16 || p.hidden % 16 != 0 || p.inter % 16 != 0)
    STRATA_CUDA_FAIL("moe fp8 decode: arguments outside the kernel's limits (checked in supports)");
  size_t total = 0;
  const Fp8Scratch s = carve(p, &total);
  auto st = static_cast<cudaStream_t>(stream);
  if (p.w8a8)
    launch_b<BKind::E4M3>(p, s, index_errors, st);
  else
    launch_b<BKind::BF16>(p, s, index_errors, st);
}

}  // namespace strata::cuda
