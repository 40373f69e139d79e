// relu2, add and cast: one thread per element (bf16 relu2 / add with 16-byte aligned rows: one
// 8-value vector per thread), rows walked by the y grid (row strides may exceed the width), the
// math in f32 and one rounding to the output dtype, as on the host. relu2 may also write the
// e4m3 copy of its output for a W8A8 linear (QuantOut), with or without the act output.
#include "ops/cuda/common.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/pdl.cuh"
#include "ops/cuda/quantize_e4m3.cuh"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

dim3 grid_2d(const Mat& m) {
  return dim3(grid_1d(m.cols, kThreads), static_cast<unsigned>(m.rows < 65535 ? m.rows : 65535));
}

// out null: only the e4m3 copy q is written; q.p null: only out.
template <class T>
__global__ void relu2_kernel(const T* x, int64_t ldx, T* out, int64_t ldo, int64_t rows,
                             int64_t cols, QDev q) {
  pdl_enter();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = fmaxf(to_f32(x[r * ldx + c]), 0.f);
    const T o = from_f32<T>(v * v);
    if (out) out[r * ldo + c] = o;
    if (q.p) q.p[r * q.ld + c] = quantize_e4m3(q, to_f32(o));
  }
}

// bf16 rows of 16-byte aligned 8-value vectors (cols, ld multiples of 8): one vector per thread.
__device__ __forceinline__ uint4 map8(uint4 v, uint4 w, bool add) {
  uint32_t in[4] = {v.x, v.y, v.z, v.w}, other[4] = {w.x, w.y, w.z, w.w}, res[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&in[i]));
    float2 r;
    if (add) {
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&other[i]));
      r = make_float2(a.x + b.x, a.y + b.y);
    } else {
      const float x0 = fmaxf(a.x, 0.f), x1 = fmaxf(a.y, 0.f);
      r = make_float2(x0 * x0, x1 * x1);
    }
    const __nv_bfloat162 o = __floats2bfloat162_rn(r.x, r.y);
    res[i] = *reinterpret_cast<const uint32_t*>(&o);
  }
  return make_uint4(res[0], res[1], res[2], res[3]);
}

// ADD: out = a + b, else out = relu(a)^2 (b unused). Vectors of 8 bf16; ld in vectors. q (relu2
// only): the e4m3 copy, 8 bytes per vector (q.ld in bytes); out may then be null.
template <bool ADD>
__global__ void bf16x8_kernel(const uint4* a, int64_t lda, const uint4* b, int64_t ldb, uint4* out,
                              int64_t ldo, int64_t rows, int64_t vcols, QDev q) {
  pdl_enter();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= vcols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint4 v = map8(a[r * lda + c], ADD ? b[r * ldb + c] : make_uint4(0, 0, 0, 0), ADD);
    if (out) out[r * ldo + c] = v;
    if (!ADD && q.p) {
      bf16 vals[8];
      memcpy(vals, &v, sizeof(v));
      store_e4m3(q, q.p + r * q.ld + 8 * c, vals);
    }
  }
}

bool vec8(const Mat& m) {
  return m.dt == DType::BF16 && m.cols % 8 == 0 && m.ld % 8 == 0 &&
         reinterpret_cast<uintptr_t>(m.p) % 16 == 0;
}
// An optional out (p null) or e4m3 copy that the vector kernels can write: 16-byte vectors of
// out, 8-byte groups of q.
bool vec8_out(const Mat& m) {
  return m.p == nullptr || vec8(m);
}
bool vec8_q(const QuantOut& q) {
  return q.p == nullptr || (q.ld % 8 == 0 && reinterpret_cast<uintptr_t>(q.p) % 8 == 0);
}

void launch_bf16x8(bool add, const Mat& a, const Mat* b, const Mat& out, const QuantOut& q,
                   cudaStream_t s) {
  const int64_t vc = a.cols / 8;
  const dim3 grid(grid_1d(vc, kThreads), static_cast<unsigned>(a.rows < 65535 ? a.rows : 65535));
  const auto* pa = static_cast<const uint4*>(a.p);
  auto* po = static_cast<uint4*>(out.p);
  if (add)
    launch_pdl(bf16x8_kernel<true>, grid, dim3(kThreads), 0, s, pa, a.ld / 8,
               static_cast<const uint4*>(b->p), b->ld / 8, po, out.ld / 8, a.rows, vc, qdev_of(q));
  else
    launch_pdl(bf16x8_kernel<false>, grid, dim3(kThreads), 0, s, pa, a.ld / 8, nullptr, 0, po,
               out.ld / 8, a.rows, vc, qdev_of(q));
  STRATA_CUDA_LAUNCH_CHECK();
}

template <class T>
__global__ void add_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, T* out, int64_t ldo,
                           int64_t rows, int64_t cols) {
  pdl_enter();
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

void launch_relu2(const Mat& x, const Mat& out, const QuantOut& q, void* stream) {
  if (x.rows == 0 || x.cols == 0) return;
  if (vec8(x) && vec8_out(out) && vec8_q(q))
    return launch_bf16x8(false, x, nullptr, out, q, static_cast<cudaStream_t>(stream));
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(relu2_kernel<T>, grid_2d(x), dim3(kThreads), 0, static_cast<cudaStream_t>(stream),
               static_cast<const T*>(x.p), x.ld, static_cast<T*>(out.p), out.ld, x.rows, x.cols,
               qdev_of(q));
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_add(const Mat& a, const Mat& b, const Mat& out, void* stream) {
  if (a.rows == 0 || a.cols == 0) return;
  if (vec8(a) && vec8(b) && vec8(out))
    return launch_bf16x8(true, a, &b, out, QuantOut{}, static_cast<cudaStream_t>(stream));
  with_act(a.dt, [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(add_kernel<T>, grid_2d(a), dim3(kThreads), 0, static_cast<cudaStream_t>(stream),
               static_cast<const T*>(a.p), a.ld, static_cast<const T*>(b.p), b.ld,
               static_cast<T*>(out.p), out.ld, a.rows, a.cols);
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
