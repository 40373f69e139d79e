// Global -> shared staging of the tensor-core scan's bf16 operands (ssm_scan_mma.cu). Views whose
// first element and row stride keep every group of 8 elements 16-byte aligned (the model's x, B,
// C column ranges and the scan's own scratch) are read with 16-byte loads, several rows per
// thread issued before any is stored, each thread on a fixed 16-byte column (one division per
// thread, none per element); other views (the op harness's odd offsets) take the scalar path.
// Zero fill past `valid` / `len` is the same on both paths.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace strata::cuda::scan {

namespace {

using sbf16 = __nv_bfloat16;

// Rows a thread loads before storing any of them: 16-byte loads kept in flight per thread.
constexpr int kRowsInFlight = 4;

__device__ __forceinline__ bool aligned16(const void* p, int64_t ld) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0 && (ld & 7) == 0;
}

__device__ __forceinline__ uint4 load16(const sbf16* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ void store16(sbf16* p, uint4 v) {
  *reinterpret_cast<uint4*>(p) = v;
}

// Element k (0..7) of a 16-byte group of bf16.
__device__ __forceinline__ sbf16 lane_of(const uint4& v, int k) {
  const uint32_t w = k < 2 ? v.x : k < 4 ? v.y : k < 6 ? v.z : v.w;
  return __ushort_as_bfloat16(static_cast<unsigned short>((k & 1) ? (w >> 16) : (w & 0xffffu)));
}

// A thread's fixed place in a [rows][V groups of 8] sweep: group v, first row r0, row step.
// Threads past step * V idle (when V does not divide the block).
struct Sweep {
  int v, r0, step;
  __device__ explicit Sweep(int V) {
    const int t = static_cast<int>(threadIdx.x);
    r0 = t / V;
    v = t - r0 * V;
    step = static_cast<int>(blockDim.x) / V;
    if (r0 >= step) r0 = 1 << 30;  // idle
  }
};

// tile[r][k] = src[(t0 + r) * ld + col0 + k] for r < valid, 0 for valid <= r < rows; k < width
// (width <= kMaxWidth, a multiple of 8 on the 16-byte path; tile rows 16-byte aligned there).
template <int kMaxWidth>
__device__ __forceinline__ void load_rows(sbf16* tile, int ldt, const sbf16* src, int64_t ld,
                                          int64_t t0, int valid, int rows, int64_t col0,
                                          int width) {
  const sbf16* base = src + t0 * ld + col0;
  if (aligned16(base, ld) && (width & 7) == 0 && (ldt & 7) == 0) {
    const Sweep sw(kMaxWidth / 8);
    if (8 * sw.v >= width) return;
    for (int r = sw.r0; r < rows; r += kRowsInFlight * sw.step) {
      uint4 buf[kRowsInFlight];
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int rr = r + i * sw.step;
        buf[i] = rr < valid ? load16(base + rr * ld + 8 * sw.v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int rr = r + i * sw.step;
        if (rr < rows) store16(tile + rr * ldt + 8 * sw.v, buf[i]);
      }
    }
    return;
  }
  const int total = rows * width;
#pragma unroll 4
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int r = e / width, k = e - r * width;
    tile[r * ldt + k] = r < valid ? base[r * ld + k] : __float2bfloat16_rn(0.f);
  }
}

__device__ __forceinline__ void cp_async16(sbf16* smem, const sbf16* gmem, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: zero fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// load_rows with the copies left in flight: 16-byte cp.async copies on the aligned path (the
// caller commits, waits with cp_async_wait_all and synchronizes before reading the tile); the
// scalar path stores synchronously (the same wait and barrier cover it).
__device__ __forceinline__ void load_rows_async(sbf16* tile, int ldt, const sbf16* src, int64_t ld,
                                                int64_t t0, int valid, int rows, int64_t col0,
                                                int width) {
  const sbf16* base = src + t0 * ld + col0;
  if (aligned16(base, ld) && (width & 7) == 0 && (ldt & 7) == 0) {
    const Sweep sw(width / 8);
    for (int r = sw.r0; r < rows; r += sw.step)
      cp_async16(tile + r * ldt + 8 * sw.v, r < valid ? base + r * ld + 8 * sw.v : base,
                 r < valid);
    return;
  }
  const int total = rows * width;
#pragma unroll 4
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int r = e / width, k = e - r * width;
    tile[r * ldt + k] = r < valid ? base[r * ld + k] : __float2bfloat16_rn(0.f);
  }
}

// Transposed staging with a per-row scale: tile[k][s] = bf16(scale(s) * src[(t0 + s) * ld +
// col0 + k]) for s < len, 0 for len <= s < Q; k < width. kScale = false stores the element as
// it is (no rounding step: the value is bf16 already). `scale` is read only for s < len.
// On the 16-byte path the lanes of a warp hold the same s and consecutive groups v, so the
// tile rows they store to (8 v + k) are 8 apart: with the scan tiles' row stride (4 banks mod
// 32) every v would hit the same bank. Each thread therefore stores its 8 elements starting at
// element v mod 8 (rows 8 v + (k + v) % 8): at most 2 lanes per bank instead of 8-16.
template <bool kScale, class Scale>
__device__ __forceinline__ void load_transposed(sbf16* tile, int ldt, const sbf16* src,
                                                int64_t ld, int64_t t0, int len, int Q,
                                                int64_t col0, int width, Scale scale) {
  const sbf16* base = src + t0 * ld + col0;
  const sbf16 zero = __float2bfloat16_rn(0.f);
  if (aligned16(base, ld) && (width & 7) == 0) {
    const Sweep sw(width / 8);
    for (int s = sw.r0; s < Q; s += kRowsInFlight * sw.step) {
      uint4 buf[kRowsInFlight];
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int ss = s + i * sw.step;
        buf[i] = ss < len ? load16(base + ss * ld + 8 * sw.v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int ss = s + i * sw.step;
        if (ss >= Q) continue;
        const float w = kScale && ss < len ? scale(ss) : 0.f;
        sbf16* col = tile + 8 * sw.v * ldt + ss;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int kk = (k + sw.v) & 7;
          const sbf16 e = lane_of(buf[i], kk);
          col[kk * ldt] = !kScale    ? e
                          : ss < len ? __float2bfloat16_rn(w * __bfloat162float(e))
                                     : zero;
        }
      }
    }
    return;
  }
  const int total = Q * width;
#pragma unroll 4
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int s = e / width, k = e - s * width;
    sbf16 v = zero;
    if (s < len) {
      const sbf16 b = base[s * ld + k];
      v = kScale ? __float2bfloat16_rn(scale(s) * __bfloat162float(b)) : b;
    }
    tile[k * ldt + s] = v;
  }
}

}  // namespace
}  // namespace strata::cuda::scan
