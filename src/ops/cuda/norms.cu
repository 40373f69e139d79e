// RMSNorm kernels: one block per row (or per row and group); the sum of squares in f32 over
// the values as stored (the residual after its rounding), 1/sqrt like the host, the weight
// applied after the activation rounding, as vLLM does.
#include "ops/cuda/common.cuh"
#include "ops/cuda/norms.h"

namespace strata::cuda {

namespace {

template <class T>
__global__ void rms_norm_kernel(const T* x, int64_t ldx, T* res, int64_t ldr, const T* w, float eps,
                                T* out, int64_t ldo, int64_t H) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * ldx;
  T* rr = res ? res + r * ldr : nullptr;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if (rr) {
      const T stored = from_f32<T>(v + to_f32(rr[i]));
      rr[i] = stored;
      v = to_f32(stored);
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(H) + eps);
  T* orow = out + r * ldo;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    // Same thread, same index as the first loop: the residual it wrote is visible to it.
    const float v = rr ? to_f32(rr[i]) : to_f32(xr[i]);
    orow[i] = from_f32<T>(round_to<T>(v * inv) * to_f32(w[i]));
  }
}

template <class T>
__global__ void gated_rms_norm_kernel(const T* y, int64_t ldy, const T* z, int64_t ldz, const T* w,
                                      int64_t group_size, float eps, T* out, int64_t ldo) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, g0 = static_cast<int64_t>(blockIdx.y) * group_size;
  const T* yr = y + r * ldy + g0;
  const T* zr = z + r * ldz + g0;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
    const float v = to_f32(yr[i]) * siluf_(to_f32(zr[i]));
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(group_size) + eps);
  T* orow = out + r * ldo + g0;
  for (int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
    const float v = to_f32(yr[i]) * siluf_(to_f32(zr[i]));
    orow[i] = from_f32<T>(round_to<T>(v * inv) * to_f32(w[g0 + i]));
  }
}

int threads_for(int64_t width) {
  return width >= 2048 ? 512 : width >= 512 ? 256 : 128;
}

}  // namespace

void launch_rms_norm(const Mat& x, const Mat& residual, const Vec& weight, float eps,
                     const Mat& out, void* stream) {
  if (x.rows == 0) return;
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    rms_norm_kernel<T><<<static_cast<unsigned>(x.rows), threads_for(x.cols), 0,
                         static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x.p), x.ld, static_cast<T*>(residual.p), residual.ld,
        static_cast<const T*>(weight.p), eps, static_cast<T*>(out.p), out.ld, x.cols);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_gated_rms_norm(const Mat& y, const Mat& z, const Vec& weight, int64_t groups, float eps,
                           const Mat& out, void* stream) {
  if (y.rows == 0) return;
  const int64_t gs = y.cols / groups;
  with_act(y.dt, [&](auto tag) {
    using T = decltype(tag);
    dim3 grid(static_cast<unsigned>(y.rows), static_cast<unsigned>(groups));
    gated_rms_norm_kernel<T><<<grid, threads_for(gs), 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(y.p), y.ld, static_cast<const T*>(z.p), z.ld,
        static_cast<const T*>(weight.p), gs, eps, static_cast<T*>(out.p), out.ld);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
