// relu2, add and cast: one thread per element, rows walked by the y grid (row strides may exceed
// the width), the math in f32 and one rounding to the output dtype, as on the host.
#include "ops/cuda/common.cuh"
#include "ops/cuda/elementwise.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

dim3 grid_2d(const Mat& m) {
  return dim3(grid_1d(m.cols, kThreads), static_cast<unsigned>(m.rows < 65535 ? m.rows : 65535));
}

template <class T>
__global__ void relu2_kernel(const T* x, int64_t ldx, T* out, int64_t ldo, int64_t rows,
                             int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = fmaxf(to_f32(x[r * ldx + c]), 0.f);
    out[r * ldo + c] = from_f32<T>(v * v);
  }
}

template <class T>
__global__ void add_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, T* out, int64_t ldo,
                           int64_t rows, int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    out[r * ldo + c] = from_f32<T>(to_f32(a[r * lda + c]) + to_f32(b[r * ldb + c]));
}

template <class TI, class TO>
__global__ void cast_kernel(const TI* x, TO* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f32<TO>(to_f32(x[i]));
}

}  // namespace

void launch_relu2(const Mat& x, const Mat& out, void* stream) {
  if (x.rows == 0 || x.cols == 0) return;
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    relu2_kernel<T><<<grid_2d(x), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x.p), x.ld, static_cast<T*>(out.p), out.ld, x.rows, x.cols);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_add(const Mat& a, const Mat& b, const Mat& out, void* stream) {
  if (a.rows == 0 || a.cols == 0) return;
  with_act(a.dt, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_2d(a), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(a.p), a.ld, static_cast<const T*>(b.p), b.ld, static_cast<T*>(out.p),
        out.ld, a.rows, a.cols);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_cast(const Vec& x, const Vec& out, void* stream) {
  if (x.n == 0) return;
  const unsigned blocks =
      static_cast<unsigned>(grid_1d(x.n, kThreads) < 65536 ? grid_1d(x.n, kThreads) : 65536);
  with_float(x.dt, [&](auto ti) {
    using TI = decltype(ti);
    with_float(out.dt, [&](auto to) {
      using TO = decltype(to);
      cast_kernel<TI, TO><<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const TI*>(x.p), static_cast<TO*>(out.p), x.n);
      STRATA_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace strata::cuda
