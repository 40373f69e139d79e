// RMSNorm kernels: one block per row (or per row and group); the sum of squares in f32 over
// the values as stored (the residual after its rounding), 1/sqrt like the host, the weight
// applied after the activation rounding, as vLLM does.
// With an e4m3 copy requested (QuantOut, the input of a W8A8 linear) each value stored to act is
// also written as e4m3_sat(value / scale); `out` may then be absent (null).
// Two forms of each: a register form for rows that are 16-byte aligned (every real model's:
// each thread loads its 16-byte chunks of x, the residual, z and the weight at once, keeps them
// in registers across the reduction and writes from there — one memory round trip instead of
// a load-reduce-reload chain, which made a decode-row norm latency-bound), and a strided form
// for any other layout.
#include "ops/cuda/common.cuh"
#include "ops/cuda/norms.h"
#include "ops/cuda/pdl.cuh"
#include "ops/cuda/quantize_e4m3.cuh"

#include <algorithm>
#include <cstdint>

namespace strata::cuda {

namespace {

// kX2: x2 given (a compile-time switch: without it the kernel is the one before x2 existed; a
// run-time test made the no-x2 register form 45% slower at 512 rows on the H200).
template <class T, bool kX2>
__global__ void rms_norm_kernel(const T* x, int64_t ldx, const T* x2, int64_t ldx2, T* res,
                                int64_t ldr, const T* w, float eps, T* out, int64_t ldo, int64_t H,
                                QDev q) {
  pdl_enter();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * ldx;
  const T* x2r = kX2 ? x2 + r * ldx2 : nullptr;
  T* rr = res ? res + r * ldr : nullptr;
  // x, or the stored sum x + x2 (the add op fused in).
  auto x_at = [&](int64_t i) {
    return kX2 ? round_to<T>(to_f32(xr[i]) + to_f32(x2r[i])) : to_f32(xr[i]);
  };
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = x_at(i);
    if (rr) {
      const T stored = from_f32<T>(v + to_f32(rr[i]));
      rr[i] = stored;
      v = to_f32(stored);
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(H) + eps);
  T* orow = out ? out + r * ldo : nullptr;
  uint8_t* qrow = q.p ? q.p + r * q.ld : nullptr;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    // Same thread, same index as the first loop: the residual it wrote is visible to it.
    const float v = rr ? to_f32(rr[i]) : x_at(i);
    const T o = from_f32<T>(round_to<T>(v * inv) * to_f32(w[i]));
    if (orow) orow[i] = o;
    if (qrow) qrow[i] = quantize_e4m3(q, to_f32(o));
  }
}

template <class T>
__global__ void gated_rms_norm_kernel(const T* y, int64_t ldy, const T* z, int64_t ldz, const T* w,
                                      int64_t group_size, float eps, T* out, int64_t ldo, QDev q) {
  pdl_enter();
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
  T* orow = out ? out + r * ldo + g0 : nullptr;
  uint8_t* qrow = q.p ? q.p + r * q.ld + g0 : nullptr;
  for (int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
    const float v = to_f32(yr[i]) * siluf_(to_f32(zr[i]));
    const T o = from_f32<T>(round_to<T>(v * inv) * to_f32(w[g0 + i]));
    if (orow) orow[i] = o;
    if (qrow) qrow[i] = quantize_e4m3(q, to_f32(o));
  }
}

// 16 bytes of a row: the unit of the register form.
template <class T>
struct alignas(16) Chunk {
  static constexpr int kValues = 16 / sizeof(T);
  T v[kValues];
};
constexpr int kMaxChunksPerThread = 4;

template <class T>
__device__ __forceinline__ Chunk<T> load_chunk(const T* p) {
  return *reinterpret_cast<const Chunk<T>*>(p);
}
template <class T>
__device__ __forceinline__ void store_chunk(T* p, const Chunk<T>& c) {
  *reinterpret_cast<Chunk<T>*>(p) = c;
}

// One block per row; thread t owns chunks t, t + blockDim, ... (at most kMaxChunksPerThread).
// out null: only q (the e4m3 copy) is written; q.p null: only out.
template <class T, bool kX2>
__global__ void rms_norm_registers_kernel(const T* x, int64_t ldx, const T* x2, int64_t ldx2,
                                          T* res, int64_t ldr, const T* w, float eps, T* out,
                                          int64_t ldo, int64_t H, QDev q) {
  pdl_enter();
  constexpr int V = Chunk<T>::kValues;
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, chunks = H / V;
  Chunk<T> xc[kMaxChunksPerThread], x2c[kMaxChunksPerThread], rc[kMaxChunksPerThread],
      wc[kMaxChunksPerThread];
#pragma unroll
  for (int k = 0; k < kMaxChunksPerThread; ++k) {  // every load issued before any use
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c >= chunks) break;
    xc[k] = load_chunk(x + r * ldx + c * V);
    if (kX2) x2c[k] = load_chunk(x2 + r * ldx2 + c * V);
    if (res) rc[k] = load_chunk(res + r * ldr + c * V);
    wc[k] = load_chunk(w + c * V);
  }
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxChunksPerThread; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c >= chunks) break;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if (kX2) xc[k].v[i] = from_f32<T>(to_f32(xc[k].v[i]) + to_f32(x2c[k].v[i]));
      if (res) xc[k].v[i] = from_f32<T>(to_f32(xc[k].v[i]) + to_f32(rc[k].v[i]));
      const float v = to_f32(xc[k].v[i]);
      ss += v * v;
    }
    if (res) store_chunk(res + r * ldr + c * V, xc[k]);  // the residual stream, as stored
  }
  ss = block_sum(ss, scratch);  // every thread has loaded its x: out may alias x from here
  const float inv = 1.f / sqrtf(ss / static_cast<float>(H) + eps);
#pragma unroll
  for (int k = 0; k < kMaxChunksPerThread; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c >= chunks) break;
    Chunk<T> o;
#pragma unroll
    for (int i = 0; i < V; ++i)
      o.v[i] = from_f32<T>(round_to<T>(to_f32(xc[k].v[i]) * inv) * to_f32(wc[k].v[i]));
    if (out) store_chunk(out + r * ldo + c * V, o);
    if (q.p) store_e4m3(q, q.p + r * q.ld + c * V, o.v);
  }
}

// One (row, group) of the gated norm in registers: y, z, w, out and qp (q's e4m3 copy, bytes)
// point at the group's first value (out or qp null: not written); this thread holds chunks
// first + k * step (k < CPT, below group_size / V), and `reduce` sums the squares over the
// threads that share the group (the block, or one warp).
template <class T, int CPT, class Reduce>
__device__ __forceinline__ void gated_norm_group(const T* y, const T* z, const T* w, T* out,
                                                 uint8_t* qp, const QDev& q, int64_t group_size,
                                                 int64_t first, int64_t step, float eps,
                                                 Reduce reduce) {
  constexpr int V = Chunk<T>::kValues;
  const int64_t chunks = group_size / V;
  Chunk<T> yc[CPT], zc[CPT], wc[CPT];
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    const int64_t c = first + k * step;
    if (c >= chunks) break;
    yc[k] = load_chunk(y + c * V);
    zc[k] = load_chunk(z + c * V);
    wc[k] = load_chunk(w + c * V);
  }
  float gated[CPT][V];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    if (first + k * step >= chunks) break;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float v = to_f32(yc[k].v[i]) * siluf_(to_f32(zc[k].v[i]));
      gated[k][i] = v;
      ss += v * v;
    }
  }
  ss = reduce(ss);  // every thread has loaded its part of the group: out may alias y from here
  const float inv = 1.f / sqrtf(ss / static_cast<float>(group_size) + eps);
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    const int64_t c = first + k * step;
    if (c >= chunks) break;
    Chunk<T> o;
#pragma unroll
    for (int i = 0; i < V; ++i)
      o.v[i] = from_f32<T>(round_to<T>(gated[k][i] * inv) * to_f32(wc[k].v[i]));
    if (out) store_chunk(out + c * V, o);
    if (qp) store_e4m3(q, qp + c * V, o.v);
  }
}

// One block per (row, group), as gated_rms_norm_kernel, in the register form.
template <class T>
__global__ void gated_rms_norm_registers_kernel(const T* y, int64_t ldy, const T* z, int64_t ldz,
                                                const T* w, int64_t group_size, float eps, T* out,
                                                int64_t ldo, QDev q) {
  pdl_enter();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, g0 = static_cast<int64_t>(blockIdx.y) * group_size;
  gated_norm_group<T, kMaxChunksPerThread>(
      y + r * ldy + g0, z + r * ldz + g0, w + g0, out ? out + r * ldo + g0 : nullptr,
      q.p ? q.p + r * q.ld + g0 : nullptr, q, group_size, threadIdx.x, blockDim.x, eps,
      [&](float v) { return block_sum(v, scratch); });
}

// One warp per (row, group), kWarpBlock / 32 pairs per block: the group's chunks (at most 32 x
// CPL) in registers, the sum of squares over the warp's lanes by shuffles. The block form
// spends a shared-memory round and two block barriers on every (row, group); with Nano-3's
// groups of 512 values that is 4,096 blocks of 64 threads for 512 tokens.
constexpr int kWarpBlock = 128;

template <class T, int CPL>
__global__ void __launch_bounds__(kWarpBlock)
    gated_rms_norm_warp_kernel(const T* y, int64_t ldy, const T* z, int64_t ldz, const T* w,
                               int64_t group_size, int64_t groups, int64_t pairs, float eps, T* out,
                               int64_t ldo, QDev q) {
  pdl_enter();
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * (kWarpBlock / 32) + (threadIdx.x >> 5);
  if (pair >= pairs) return;  // the whole warp
  const int64_t r = pair / groups, g0 = (pair % groups) * group_size;
  gated_norm_group<T, CPL>(y + r * ldy + g0, z + r * ldz + g0, w + g0,
                           out ? out + r * ldo + g0 : nullptr, q.p ? q.p + r * q.ld + g0 : nullptr,
                           q, group_size, threadIdx.x & 31, 32, eps,
                           [](float v) { return warp_sum(v); });
}

bool aligned16(const void* p) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The e4m3 copy fits the register forms: V-value chunks land on V-byte aligned stores.
bool q_fits(const QuantOut& q, int64_t V) {
  return q.p == nullptr || (aligned16(q.p) && q.ld % V == 0);
}

// Threads for the register form over `chunks` 16-byte chunks (0 = the register form cannot
// hold the row: more than 1024 x kMaxChunksPerThread chunks).
int register_threads(int64_t chunks) {
  for (int64_t t = 32; t <= 1024; t *= 2)
    if (chunks <= t * kMaxChunksPerThread) return static_cast<int>(std::max<int64_t>(t, 64));
  return 0;
}

int threads_for(int64_t width) {
  return width >= 2048 ? 512 : width >= 512 ? 256 : 128;
}

}  // namespace

void launch_rms_norm(const Mat& x, const Mat& x2, const Mat& residual, const Vec& weight, float eps,
                     const Mat& out, const QuantOut& q, void* stream) {
  if (x.rows == 0) return;
  with_act(x.dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Chunk<T>::kValues;
    const bool has_res = residual.p != nullptr, has_x2 = x2.p != nullptr;
    const int rt = x.cols % V == 0 ? register_threads(x.cols / V) : 0;
    if (rt > 0 && x.ld % V == 0 && out.ld % V == 0 && (!has_res || residual.ld % V == 0) &&
        (!has_x2 || x2.ld % V == 0) && aligned16(x.p) && aligned16(x2.p) && aligned16(out.p) &&
        aligned16(residual.p) && aligned16(weight.p) && q_fits(q, V)) {
      auto kernel =
          has_x2 ? rms_norm_registers_kernel<T, true> : rms_norm_registers_kernel<T, false>;
      launch_pdl(kernel, dim3(static_cast<unsigned>(x.rows)), dim3(rt), 0,
                 static_cast<cudaStream_t>(stream), static_cast<const T*>(x.p), x.ld,
                 static_cast<const T*>(x2.p), x2.ld, static_cast<T*>(residual.p), residual.ld,
                 static_cast<const T*>(weight.p), eps, static_cast<T*>(out.p), out.ld, x.cols,
                 qdev_of(q));
      STRATA_CUDA_LAUNCH_CHECK();
      return;
    }
    auto kernel = has_x2 ? rms_norm_kernel<T, true> : rms_norm_kernel<T, false>;
    launch_pdl(kernel, dim3(static_cast<unsigned>(x.rows)), dim3(threads_for(x.cols)), 0,
               static_cast<cudaStream_t>(stream), static_cast<const T*>(x.p), x.ld,
               static_cast<const T*>(x2.p), x2.ld, static_cast<T*>(residual.p), residual.ld,
               static_cast<const T*>(weight.p), eps, static_cast<T*>(out.p), out.ld, x.cols,
               qdev_of(q));
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

void launch_gated_rms_norm(const Mat& y, const Mat& z, const Vec& weight, int64_t groups, float eps,
                           const Mat& out, const QuantOut& q, void* stream) {
  if (y.rows == 0) return;
  const int64_t gs = y.cols / groups;
  with_act(y.dt, [&](auto tag) {
    using T = decltype(tag);
    dim3 grid(static_cast<unsigned>(y.rows), static_cast<unsigned>(groups));
    constexpr int V = Chunk<T>::kValues;
    const int rt = gs % V == 0 ? register_threads(gs / V) : 0;
    if (rt > 0 && y.ld % V == 0 && z.ld % V == 0 && out.ld % V == 0 && aligned16(y.p) &&
        aligned16(z.p) && aligned16(out.p) && aligned16(weight.p) && q_fits(q, V)) {
      launch_pdl(gated_rms_norm_registers_kernel<T>, grid, dim3(rt), 0,
                 static_cast<cudaStream_t>(stream), static_cast<const T*>(y.p), y.ld,
                 static_cast<const T*>(z.p), z.ld, static_cast<const T*>(weight.p), gs, eps,
                 static_cast<T*>(out.p), out.ld, qdev_of(q));
      STRATA_CUDA_LAUNCH_CHECK();
      return;
    }
    launch_pdl(gated_rms_norm_kernel<T>, grid, dim3(threads_for(gs)), 0,
               static_cast<cudaStream_t>(stream), static_cast<const T*>(y.p), y.ld,
               static_cast<const T*>(z.p), z.ld, static_cast<const T*>(weight.p), gs, eps,
               static_cast<T*>(out.p), out.ld, qdev_of(q));
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

bool gated_rms_norm_warp_fits(const Mat& y, const Mat& z, const Vec& weight, int64_t groups,
                              const Mat& out, const QuantOut& q) {
  if (groups < 1 || y.cols % groups != 0) return false;
  const int64_t gs = y.cols / groups, V = 16 / static_cast<int64_t>(dtype_size(y.dt));
  return gs % V == 0 && gs / V <= 32 * kWarpMaxChunksPerLane && y.ld % V == 0 && z.ld % V == 0 &&
         out.ld % V == 0 && aligned16(y.p) && aligned16(z.p) && aligned16(out.p) &&
         aligned16(weight.p) && q_fits(q, V);
}

void launch_gated_rms_norm_warp(const Mat& y, const Mat& z, const Vec& weight, int64_t groups,
                                float eps, const Mat& out, const QuantOut& q, void* stream) {
  if (y.rows == 0) return;
  const int64_t gs = y.cols / groups, pairs = y.rows * groups;
  const unsigned blocks = grid_1d(pairs, kWarpBlock / 32);
  with_act(y.dt, [&](auto tag) {
    using T = decltype(tag);
    const int64_t chunks = gs / Chunk<T>::kValues;
    auto launch = [&](auto kernel) {
      launch_pdl(kernel, dim3(blocks), dim3(kWarpBlock), 0, static_cast<cudaStream_t>(stream),
                 static_cast<const T*>(y.p), y.ld, static_cast<const T*>(z.p), z.ld,
                 static_cast<const T*>(weight.p), gs, groups, pairs, eps, static_cast<T*>(out.p),
                 out.ld, qdev_of(q));
      STRATA_CUDA_LAUNCH_CHECK();
    };
    static_assert(kWarpMaxChunksPerLane == 8, "the dispatch below covers 2, 4 and 8 chunks");
    if (chunks <= 64)
      launch(gated_rms_norm_warp_kernel<T, 2>);
    else if (chunks <= 128)
      launch(gated_rms_norm_warp_kernel<T, 4>);
    else
      launch(gated_rms_norm_warp_kernel<T, 8>);
  });
}

}  // namespace strata::cuda
