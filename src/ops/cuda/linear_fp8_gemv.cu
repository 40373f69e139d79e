// The small-M FP8 linear (decode): out[t, n] = scale * sum_k x[t, k] * W[n, k] with e4m3 W on
// the tensor cores (linear_fp8_mma.cuh). One block per 16 output features. W8A8 (T <= 8)
// quantizes x (bf16) to e4m3 with the static input scale inside each block, so the layer is
// one launch; that costs T x K divisions per block, which is why T stops at 8 (at T = 16 it
// measured 3.5x slower than cuBLASLt's FP8 GEMM). An x already e4m3 (quantized by its producer)
// is staged as a copy. W8A16 (T <= 16) stages x as bf16 and widens
// the weights to bf16 exactly. Two cores: the register core (linear_fp8_mma.cuh, cuda.fp8_gemv)
// and the streamed core (linear_fp8_stream.cuh, cuda.fp8_stream: the weights pass through
// shared memory with cp.async; one block per 16 or 8 output features).
#include <type_traits>

#include "ops/cuda/linear.h"
#include "ops/cuda/linear_fp8_mma.cuh"
#include "ops/cuda/linear_fp8_stream.cuh"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

using fp8::BKind;

struct Fp8LinearParams {
  const void* x;  // bf16, or e4m3 (W8A8 with x quantized by its producer)
  int64_t ldx;
  int M;
  const uint8_t* w;  // [N, K]
  int64_t N, K;
  float input_scale, scale;
  void* out;
  int64_t ldo;
  bool out_f32;
  int64_t stride;  // staged x row stride (bytes)
};

// Sums the warps' accumulators and stores rows [n0, n0 + rows) of every token.
template <int NT>
__device__ __forceinline__ void store_tile(const Fp8LinearParams& p, const float (&acc)[NT][4],
                                           fp8::TileRed<NT>& red, int64_t n0, int rows) {
  fp8::tile_sum<NT>(acc, red, rows, p.M, [&](int r, int m, float s) {
    const int64_t i = m * p.ldo + n0 + r;
    if (p.out_f32)
      static_cast<float*>(p.out)[i] = s * p.scale;
    else
      static_cast<bf16*>(p.out)[i] = __float2bfloat16_rn(s * p.scale);
  });
}

// The staged x's element type: bf16 (W8A16, and W8A8 quantizing in the kernel: Q) or e4m3.
template <BKind B, bool Q>
using StagedX = std::conditional_t<B == BKind::BF16 || Q, bf16, uint8_t>;

// grid ceil(N / 16), 256 threads, dynamic shared memory M * stride. Q: W8A8 quantizing bf16 x.
template <BKind B, bool Q, int NT, int U>
__global__ void __launch_bounds__(fp8::kThreads, fp8::min_blocks(NT))
    fp8_linear_kernel(const Fp8LinearParams p) {
  extern __shared__ __align__(16) uint8_t xs[];  // [M][stride] the staged B operand
  __shared__ fp8::TileRed<NT> red;
  pdl_trigger();
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * fp8::kTileRows;
  const int rows = static_cast<int>(min(static_cast<int64_t>(fp8::kTileRows), p.N - n0));
  const fp8::TileRows w = fp8::tile_rows(p.w + n0 * p.K, rows, p.K);
  int c0, c1;
  fp8::warp_chunks(p.K, c0, c1);
  uint4 alo[U], ahi[U];
  // The first weights in flight while the kernel before finishes (read-only: pdl.cuh) and
  // while x is staged.
  fp8::load_batch<U>(w, c0, c1, alo, ahi);
  pdl_wait();
  fp8::stage_b<B, Q>(static_cast<const StagedX<B, Q>*>(p.x), p.ldx, p.M, p.K, p.input_scale, xs,
                     p.stride);
  __syncthreads();
  float acc[NT][4];
  fp8::warp_dot<B, NT, U>(w, c0, c1, alo, ahi, xs, p.stride, p.M, acc);
  store_tile<NT>(p, acc, red, n0, rows);
}

// The streamed variant (linear_fp8_stream.cuh): grid ceil(N / R), dynamic shared memory
// kRingBytes (the weight slices) + M * stride (the staged B operand).
template <BKind B, bool Q, int NT, int R>
__global__ void __launch_bounds__(fp8::kThreads, fp8::stream_min_blocks(NT))
    fp8_linear_stream_kernel(const Fp8LinearParams p) {
  extern __shared__ __align__(128) uint8_t smem[];  // [kRingBytes] ring, then [M][stride] x
  __shared__ fp8::TileRed<NT> red;
  uint8_t* ring = smem;
  uint8_t* xs = smem + fp8::kRingBytes;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * R;
  const int rows = static_cast<int>(min(static_cast<int64_t>(R), p.N - n0));
  const fp8::StreamTile w{p.w + n0 * p.K, rows, p.K};
  pdl_trigger();
  // The first weight slices in flight while the kernel before finishes (read-only: pdl.cuh) and
  // while x is staged.
  fp8::stream_start<R>(w, ring);
  pdl_wait();
  fp8::stage_b<B, Q>(static_cast<const StagedX<B, Q>*>(p.x), p.ldx, p.M, p.K, p.input_scale, xs,
                     p.stride);
  float acc[NT][4];
  fp8::stream_dot<B, NT, R>(w, ring, xs, p.stride, p.M, acc);
  store_tile<NT>(p, acc, red, n0, rows);
}

template <auto Kernel, int NT>
void go(const Fp8LinearParams& q, unsigned blocks, size_t smem, cudaStream_t s) {
  fp8::fit_smem<Kernel>(smem, sizeof(fp8::TileRed<NT>));
  launch_pdl(Kernel, dim3(blocks), dim3(fp8::kThreads), smem, s, q);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <BKind B, bool Q, int NT>
void launch_nt(const Fp8LinearParams& q, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((q.N + fp8::kTileRows - 1) / fp8::kTileRows);
  const size_t smem = static_cast<size_t>(q.M * q.stride);
  go<fp8_linear_kernel<B, Q, NT, fp8::kBatch>, NT>(q, blocks, smem, s);
}

template <BKind B, bool Q, int NT, int R>
void launch_stream_r(const Fp8LinearParams& q, cudaStream_t s) {
  constexpr auto kKernel = fp8_linear_stream_kernel<B, Q, NT, R>;
  const unsigned blocks = static_cast<unsigned>((q.N + R - 1) / R);
  const size_t smem = fp8::stream_smem(q.M * q.stride);
  fp8::fit_stream_smem<kKernel>(smem, sizeof(fp8::TileRed<NT>));
  launch_pdl(kKernel, dim3(blocks), dim3(fp8::kThreads), smem, s, q);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <BKind B, bool Q, int NT>
void launch_stream_nt(const Fp8LinearParams& q, cudaStream_t s) {
  // 8-row blocks double the blocks that stage x: only where staging is cheap (copies of bf16 or
  // e4m3 x; W8A8 from bf16 divides T x K values per block, which dominated at T = 8 on the
  // register core).
  const int64_t tiles = (q.N + fp8::kTileRows - 1) / fp8::kTileRows;
  if constexpr (NT == 1)
    if ((!Q || q.M <= 2) && fp8::rows_for_grid(tiles, q.N, 1, fp8::stream_block_slots()) == 8)
      return launch_stream_r<B, Q, NT, 8>(q, s);
  launch_stream_r<B, Q, NT, 16>(q, s);
}

// The launch parameters shared by both cores (validated like launch_linear_fp8_gemv).
Fp8LinearParams params_of(const LinearLaunch& p, const char* fail) {
  const bool w8a8 = p.input_scale > 0.f;
  const bool x_ok = p.x.dt == DType::BF16 || (w8a8 && p.x.dt == DType::F8E4M3);
  if (p.x.rows > (w8a8 ? kFp8GemvMaxRowsW8A8 : kFp8GemvMaxRows) || p.wt != DType::F8E4M3 || !x_ok ||
      p.k % 16 != 0 || fp8_gemv_stage_bytes(p.x.rows, p.k, w8a8) > fp8::kMaxStageBytes ||
      (p.out.dt != DType::F32 && p.out.dt != DType::BF16))
    STRATA_CUDA_FAIL(fail);
  Fp8LinearParams q;
  q.x = p.x.p;
  q.ldx = p.x.ld;
  q.M = static_cast<int>(p.x.rows);
  q.w = static_cast<const uint8_t*>(p.w);
  q.N = p.n;
  q.K = p.k;
  q.input_scale = p.input_scale;
  q.scale = p.scale;
  q.out = p.out.p;
  q.ldo = p.out.ld;
  q.out_f32 = p.out.dt == DType::F32;
  q.stride = w8a8 ? fp8::stage_stride<BKind::E4M3>(p.k) : fp8::stage_stride<BKind::BF16>(p.k);
  return q;
}

}  // namespace

int64_t fp8_gemv_stage_bytes(int64_t T, int64_t K, bool w8a8) {
  return T * (w8a8 ? fp8::stage_stride<BKind::E4M3>(K) : fp8::stage_stride<BKind::BF16>(K));
}

int64_t fp8_gemv_max_stage_bytes() {
  return fp8::kMaxStageBytes;
}

void launch_linear_fp8_gemv(const LinearLaunch& p, void* stream) {
  if (p.x.rows == 0 || p.n == 0) return;
  const Fp8LinearParams q =
      params_of(p, "fp8 GEMV: arguments outside the kernel's limits (checked in supports)");
  auto s = static_cast<cudaStream_t>(stream);
  if (p.input_scale > 0.f && p.x.dt == DType::F8E4M3)
    launch_nt<BKind::E4M3, false, 1>(q, s);
  else if (p.input_scale > 0.f)
    launch_nt<BKind::E4M3, true, 1>(q, s);
  else if (q.M <= 8)
    launch_nt<BKind::BF16, false, 1>(q, s);
  else
    launch_nt<BKind::BF16, false, 2>(q, s);
}

void launch_linear_fp8_stream(const LinearLaunch& p, void* stream) {
  if (p.x.rows == 0 || p.n == 0) return;
  const Fp8LinearParams q = params_of(
      p, "fp8 streamed GEMV: arguments outside the kernel's limits (checked in supports)");
  auto s = static_cast<cudaStream_t>(stream);
  if (p.input_scale > 0.f && p.x.dt == DType::F8E4M3)
    launch_stream_nt<BKind::E4M3, false, 1>(q, s);
  else if (p.input_scale > 0.f)
    launch_stream_nt<BKind::E4M3, true, 1>(q, s);
  else if (q.M <= 8)
    launch_stream_nt<BKind::BF16, false, 1>(q, s);
  else
    launch_stream_nt<BKind::BF16, false, 2>(q, s);
}

}  // namespace strata::cuda
