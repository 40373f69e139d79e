// Small-M linear (T <= 8, decode): memory-bound, so the weight must stream at full bandwidth.
// A block of 8 warps computes R output features: the warps split K, each lane keeps 2 x R
// 16-byte weight chunks in flight (8 bf16, 16 e4m3 or 4 f32 values each) and applies them to
// the same columns of every token's x (small, served from L1). Sums are f32 in a fixed order.
// R = 4 for wide layers (fewer, fuller blocks), 1 when there are few output features.
#include "ops/cuda/gemv.cuh"
#include "ops/cuda/linear.h"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

constexpr int kMaxM = static_cast<int>(kSmallMMaxRows);

template <class TX, class TW, class TO, int MM, int R, bool VEC>
__global__ void __launch_bounds__(kGemvWarps * 32)
    small_m_kernel(const TX* __restrict__ x, int64_t ldx, int M, const TW* __restrict__ w,
                   int64_t N, int64_t K, float scale, TO* __restrict__ out, int64_t ldo) {
  pdl_enter();
  __shared__ float red[kGemvWarps * MM * R];
  __shared__ float res[MM * R];
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * R;
  const int rows = static_cast<int>(min(static_cast<int64_t>(R), N - n0));
  block_gemv<TX, TW, MM, R, VEC>(x, ldx, M, w + n0 * K, rows, K, red, res);
  if (threadIdx.x < M * R) {
    const int m = threadIdx.x / R, r = threadIdx.x % R;
    if (r < rows) out[m * ldo + n0 + r] = from_f32<TO>(res[threadIdx.x] * scale);
  }
}

template <class TX, class TW, class TO, int MM, int R, bool VEC>
void launch_shape(const LinearLaunch& p, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((p.n + R - 1) / R);
  launch_pdl(small_m_kernel<TX, TW, TO, MM, R, VEC>, dim3(blocks), dim3(kGemvWarps * 32), 0, s,
             static_cast<const TX*>(p.x.p), p.x.ld, static_cast<int>(p.x.rows),
             static_cast<const TW*>(p.w), p.n, p.k, p.scale, static_cast<TO*>(p.out.p), p.out.ld);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <class TX, class TW, class TO>
void launch_typed(const LinearLaunch& p, cudaStream_t s) {
  if (!gemv_vectorizable<TX, TW>(p.x.p, p.x.ld, p.w, p.k))
    return launch_shape<TX, TW, TO, kMaxM, 1, false>(p, s);
  // Four features per block while that still leaves >= 8 blocks per multiprocessor.
  const bool wide = p.n >= 4 * 1056;
  if (p.x.rows == 1) {
    if (wide)
      launch_shape<TX, TW, TO, 1, 4, true>(p, s);
    else
      launch_shape<TX, TW, TO, 1, 1, true>(p, s);
  } else {
    if (wide)
      launch_shape<TX, TW, TO, kMaxM, 4, true>(p, s);
    else
      launch_shape<TX, TW, TO, kMaxM, 1, true>(p, s);
  }
}

template <class TX, class TW>
void launch_out(const LinearLaunch& p, cudaStream_t s) {
  if (p.out.dt == DType::F32)
    launch_typed<TX, TW, float>(p, s);
  else if (p.out.dt == DType::BF16)
    launch_typed<TX, TW, bf16>(p, s);
  else
    STRATA_CUDA_FAIL("small-M linear: out must be f32 or bf16 (checked in supports)");
}

}  // namespace

void launch_linear_small_m(const LinearLaunch& p, void* stream) {
  if (p.x.rows == 0 || p.n == 0) return;
  if (p.x.rows > kSmallMMaxRows)
    STRATA_CUDA_FAIL("small-M linear: more than 8 rows (checked in supports)");
  auto s = static_cast<cudaStream_t>(stream);
  const DType xt = p.x.dt, wt = p.wt;
  if (xt == DType::BF16 && wt == DType::BF16)
    launch_out<bf16, bf16>(p, s);
  else if (xt == DType::BF16 && wt == DType::F8E4M3)
    launch_out<bf16, uint8_t>(p, s);
  else if (xt == DType::F8E4M3 && wt == DType::F8E4M3)
    launch_out<uint8_t, uint8_t>(p, s);
  else if (xt == DType::F32 && wt == DType::F32)
    launch_out<float, float>(p, s);
  else if (xt == DType::BF16 && wt == DType::F32)
    launch_out<bf16, float>(p, s);
  else
    STRATA_CUDA_FAIL("small-M linear: unsupported x/weight dtypes (checked in supports)");
}

namespace {
template <class T>
__global__ void quantize_fp8_kernel(const T* x, int64_t ldx, int64_t rows, int64_t cols,
                                    float input_scale, uint8_t* out) {
  pdl_enter();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.x;
  if (c >= cols) return;
  // Division, not a reciprocal multiply: the same rounding as the host quantizer.
  out[r * cols + c] = f32_to_fp8_sat(to_f32(x[r * ldx + c]) / input_scale);
}
// bf16 rows 16-byte aligned with cols % 8 == 0: 8 values per thread (one 16-byte load, one
// 8-byte store), the same division and rounding. grid (rows, ceil(cols / 8 / 128)), 128 threads.
__global__ void quantize_fp8_bf16x8_kernel(const bf16* x, int64_t ldx, int64_t cols,
                                           float input_scale, uint8_t* out) {
  pdl_enter();
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  const int64_t r = blockIdx.x;
  if (c >= cols) return;
  const uint4 v = *reinterpret_cast<const uint4*>(x + r * ldx + c);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t q[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float f = __uint_as_float(((w[i / 2] >> (16 * (i % 2))) & 0xffffu) << 16);
    q[i / 4] |= static_cast<uint32_t>(f32_to_fp8_sat(f / input_scale)) << (8 * (i % 4));
  }
  *reinterpret_cast<uint2*>(out + r * cols + c) = make_uint2(q[0], q[1]);
}
template <class T>
__global__ void rows_to_f32_kernel(const T* x, int64_t ldx, int64_t cols, float* out) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.x;
  if (c < cols) out[r * cols + c] = to_f32(x[r * ldx + c]);
}
}  // namespace

void launch_rows_to_f32(const Mat& x, float* out, void* stream) {
  if (x.rows == 0 || x.cols == 0) return;
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    dim3 grid(static_cast<unsigned>(x.rows), grid_1d(x.cols, 256));
    rows_to_f32_kernel<T><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x.p), x.ld, x.cols, out);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_quantize_fp8(const Mat& x, float input_scale, void* out, void* stream) {
  if (x.rows == 0 || x.cols == 0) return;
  if (x.dt == DType::BF16 && x.cols % 8 == 0 && reinterpret_cast<uintptr_t>(x.p) % 16 == 0 &&
      (x.rows == 1 || x.ld % 8 == 0)) {
    dim3 grid(static_cast<unsigned>(x.rows), grid_1d(x.cols / 8, 128));
    launch_pdl(quantize_fp8_bf16x8_kernel, grid, dim3(128), 0, static_cast<cudaStream_t>(stream),
               static_cast<const bf16*>(x.p), x.ld, x.cols, input_scale,
               static_cast<uint8_t*>(out));
    STRATA_CUDA_LAUNCH_CHECK();
    return;
  }
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    dim3 grid(static_cast<unsigned>(x.rows), grid_1d(x.cols, 256));
    launch_pdl(quantize_fp8_kernel<T>, grid, dim3(256), 0, static_cast<cudaStream_t>(stream),
               static_cast<const T*>(x.p), x.ld, x.rows, x.cols, input_scale,
               static_cast<uint8_t*>(out));
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
