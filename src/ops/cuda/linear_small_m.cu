// Small-M linear (T <= 8, decode): memory-bound, so the weight must stream at full bandwidth.
// One warp per output feature n: lanes walk W[n, :] in 16-byte chunks (8 bf16, 16 e4m3 or
// 4 f32 values), four chunks in flight per lane, and multiply each chunk with the same columns
// of every token's x (small, served from L1). Sums are f32; the warp reduces them at the end.
#include "ops/cuda/gemv.cuh"
#include "ops/cuda/linear.h"

namespace strata::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kMaxM = static_cast<int>(kSmallMMaxRows);

template <class TX, class TW, class TO>
__global__ void __launch_bounds__(kWarps * 32)
    small_m_vec_kernel(const TX* __restrict__ x, int64_t ldx, int M, const TW* __restrict__ w, int64_t N,
                       int64_t K, float scale, TO* __restrict__ out, int64_t ldo) {
  constexpr int E = 16 / static_cast<int>(sizeof(TW));  // weight values per 16-byte chunk
  constexpr int kUnroll = 4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (n >= N) return;
  const uint4* wrow = reinterpret_cast<const uint4*>(w + n * K);
  const int64_t chunks = K / E;
  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.f;

  auto consume = [&](const uint4& wv, int64_t chunk) {
    float wf[E];
    unpack<TW, E>(reinterpret_cast<const uint32_t*>(&wv), wf);
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      if (m < M) {
        float xf[E];
        load_vals<TX, E>(x + m * ldx + chunk * E, xf);
#pragma unroll
        for (int e = 0; e < E; ++e) acc[m] = fmaf(xf[e], wf[e], acc[m]);
      }
    }
  };

  int64_t c = lane;
  for (; c + 32 * (kUnroll - 1) < chunks; c += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wrow + c + 32 * u);  // read once: stream past L1
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) consume(wv[u], c + 32 * u);
  }
  for (; c < chunks; c += 32) consume(__ldcs(wrow + c), c);

#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    if (m < M) {
      const float s = warp_sum(acc[m]);
      if (lane == m) out[m * ldo + n] = from_f32<TO>(s * scale);
    }
  }
}

// Any K and alignment: element loads, still one warp per output feature.
template <class TX, class TW, class TO>
__global__ void __launch_bounds__(kWarps * 32)
    small_m_scalar_kernel(const TX* __restrict__ x, int64_t ldx, int M, const TW* __restrict__ w, int64_t N,
                          int64_t K, float scale, TO* __restrict__ out, int64_t ldo) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (n >= N) return;
  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.f;
  for (int64_t k = lane; k < K; k += 32) {
    const float wv = elem_f32(w[n * K + k]);
#pragma unroll
    for (int m = 0; m < kMaxM; ++m)
      if (m < M) acc[m] = fmaf(elem_f32(x[m * ldx + k]), wv, acc[m]);
  }
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    if (m < M) {
      const float s = warp_sum(acc[m]);
      if (lane == m) out[m * ldo + n] = from_f32<TO>(s * scale);
    }
  }
}

template <class TX, class TW, class TO>
void launch_typed(const LinearLaunch& p, cudaStream_t s) {
  const bool vec = gemv_vectorizable<TX, TW>(p.x.p, p.x.ld, p.w, p.k);
  const unsigned blocks = static_cast<unsigned>((p.n + kWarps - 1) / kWarps);
  const int M = static_cast<int>(p.x.rows);
  if (vec)
    small_m_vec_kernel<TX, TW, TO><<<blocks, kWarps * 32, 0, s>>>(
        static_cast<const TX*>(p.x.p), p.x.ld, M, static_cast<const TW*>(p.w), p.n, p.k, p.scale,
        static_cast<TO*>(p.out.p), p.out.ld);
  else
    small_m_scalar_kernel<TX, TW, TO><<<blocks, kWarps * 32, 0, s>>>(
        static_cast<const TX*>(p.x.p), p.x.ld, M, static_cast<const TW*>(p.w), p.n, p.k, p.scale,
        static_cast<TO*>(p.out.p), p.out.ld);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <class TX, class TW>
void launch_out(const LinearLaunch& p, cudaStream_t s) {
  if (p.out.dt == DType::F32) launch_typed<TX, TW, float>(p, s);
  else if (p.out.dt == DType::BF16) launch_typed<TX, TW, bf16>(p, s);
  else STRATA_CUDA_FAIL("small-M linear: out must be f32 or bf16 (checked in supports)");
}

}  // namespace

void launch_linear_small_m(const LinearLaunch& p, void* stream) {
  if (p.x.rows == 0 || p.n == 0) return;
  if (p.x.rows > kSmallMMaxRows) STRATA_CUDA_FAIL("small-M linear: more than 8 rows (checked in supports)");
  auto s = static_cast<cudaStream_t>(stream);
  const DType xt = p.x.dt, wt = p.wt;
  if (xt == DType::BF16 && wt == DType::BF16) launch_out<bf16, bf16>(p, s);
  else if (xt == DType::BF16 && wt == DType::F8E4M3) launch_out<bf16, uint8_t>(p, s);
  else if (xt == DType::F8E4M3 && wt == DType::F8E4M3) launch_out<uint8_t, uint8_t>(p, s);
  else if (xt == DType::F32 && wt == DType::F32) launch_out<float, float>(p, s);
  else if (xt == DType::BF16 && wt == DType::F32) launch_out<bf16, float>(p, s);
  else STRATA_CUDA_FAIL("small-M linear: unsupported x/weight dtypes (checked in supports)");
}

namespace {
template <class T>
__global__ void quantize_fp8_kernel(const T* x, int64_t ldx, int64_t rows, int64_t cols, float input_scale,
                                    uint8_t* out) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t r = blockIdx.x;
  if (c >= cols) return;
  // Division, not a reciprocal multiply: the same rounding as the host quantizer.
  out[r * cols + c] = f32_to_fp8_sat(to_f32(x[r * ldx + c]) / input_scale);
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
    rows_to_f32_kernel<T><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const T*>(x.p), x.ld,
                                                                                x.cols, out);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_quantize_fp8(const Mat& x, float input_scale, void* out, void* stream) {
  if (x.rows == 0 || x.cols == 0) return;
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    dim3 grid(static_cast<unsigned>(x.rows), grid_1d(x.cols, 256));
    quantize_fp8_kernel<T><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x.p), x.ld, x.rows, x.cols, input_scale, static_cast<uint8_t*>(out));
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
