// Building blocks of the memory-bound matrix-vector kernels (small-M linear, MoE decode):
// 16-byte weight chunks unpacked to f32 (bf16 by shifts, e4m3 through the hardware fp8x2 ->
// half2 conversion), and a warp's partial dot product of one weight row with one x row.
#pragma once

#include "ops/cuda/common.cuh"

namespace strata::cuda {

__device__ __forceinline__ float elem_f32(float v) {
  return v;
}
__device__ __forceinline__ float elem_f32(bf16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float elem_f32(uint8_t v) {
  return fp8_to_f32(v);
}

// Unpacks E consecutive values of type T held in `raw` (E * sizeof(T) bytes) to f32.
template <class T, int E>
__device__ __forceinline__ void unpack(const uint32_t* raw, float* out) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      out[e] = __uint_as_float(raw[e]);
  } else if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int e = 0; e < E / 2; ++e) {
      out[2 * e] = __uint_as_float(raw[e] << 16);
      out[2 * e + 1] = __uint_as_float(raw[e] & 0xffff0000u);
    }
  } else {
    // e4m3 through the hardware conversion (pairs to half2, then to float2). Converting with
    // integer moves instead (bits to the f32 fields, * 2^120) measured slower on the H200:
    // 20.6 vs 15.0 us for the Nano-3 in_proj at M=1 (docs/BENCHMARKS.md).
#pragma unroll
    for (int e = 0; e < E / 4; ++e) {
      const uint32_t v = raw[e];
      const __half2 lo(
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3));
      const __half2 hi(
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3));
      const float2 a = __half22float2(lo), b = __half22float2(hi);
      out[4 * e] = a.x;
      out[4 * e + 1] = a.y;
      out[4 * e + 2] = b.x;
      out[4 * e + 3] = b.y;
    }
  }
}

// Loads E values of type T (8 bytes or a multiple of 16, suitably aligned) as f32.
template <class T, int E>
__device__ __forceinline__ void load_vals(const T* p, float* out) {
  constexpr int kBytes = E * static_cast<int>(sizeof(T));
  uint32_t raw[kBytes / 4];
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      raw[4 * i] = v.x;
      raw[4 * i + 1] = v.y;
      raw[4 * i + 2] = v.z;
      raw[4 * i + 3] = v.w;
    }
  } else {
    static_assert(kBytes == 8, "x chunks are 8 or a multiple of 16 bytes");
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    raw[0] = v.x;
    raw[1] = v.y;
  }
  unpack<T, E>(raw, out);
}

// Weight values per 16-byte chunk.
template <class TW>
constexpr int chunk_elems() {
  return 16 / static_cast<int>(sizeof(TW));
}

// True when rows of W (K values) and of x (leading dimension ldx) can be read in chunks.
template <class TX, class TW>
inline bool gemv_vectorizable(const void* x, int64_t ldx, const void* w, int64_t K) {
  constexpr int64_t E = chunk_elems<TW>();
  const int64_t xb =
      E * static_cast<int64_t>(sizeof(TX)) < 16 ? E * static_cast<int64_t>(sizeof(TX)) : 16;
  return K % E == 0 && (reinterpret_cast<uintptr_t>(w) & 15u) == 0 &&
         (K * static_cast<int64_t>(sizeof(TW))) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % static_cast<uintptr_t>(xb) == 0 &&
         (ldx * static_cast<int64_t>(sizeof(TX))) % xb == 0;
}

// A 16-byte weight chunk that is read once: bypass L1.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

constexpr int kGemvWarps = 8;  // blockDim.x = 256 for block_gemv

// Block-wide dot products of R consecutive weight rows (w, row stride K; rows >= `rows` are
// skipped) with M <= MM rows of x (row stride ldx): out_sm[m * R + r] = x[m] . w[r].
// The block's 8 warps split K into 8 slices; a lane keeps 2 x R 16-byte weight chunks in
// flight. Partial sums: per lane in order, a warp tree, then the 8 warps in order (fixed order:
// the result does not depend on timing). `red` holds kGemvWarps * MM * R floats of shared
// memory. Ends with the block synchronized.
template <class TX, class TW, int MM, int R, bool VEC>
__device__ __forceinline__ void block_gemv(const TX* __restrict__ x, int64_t ldx, int M,
                                           const TW* __restrict__ w, int rows, int64_t K,
                                           float* red, float* out_sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[MM][R];
#pragma unroll
  for (int m = 0; m < MM; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;
  if constexpr (VEC) {
    constexpr int E = chunk_elems<TW>();
    const int64_t chunks = K / E, per = (chunks + kGemvWarps - 1) / kGemvWarps;
    const int64_t c0 = warp * per, c1 = min(chunks, c0 + per);
    for (int64_t c = c0 + lane; c < c1; c += 64) {
      uint4 wv[2][R];
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int64_t cc = c + 32 * u;
          wv[u][r] = (cc < c1 && r < rows) ? load_stream16(w + r * K + cc * E)
                                           : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int64_t cc = c + 32 * u;
        if (cc >= c1) break;
#pragma unroll
        for (int m = 0; m < MM; ++m) {
          if (m >= M) break;
          float xf[E];
          load_vals<TX, E>(x + m * ldx + cc * E, xf);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float wf[E];
            unpack<TW, E>(reinterpret_cast<const uint32_t*>(&wv[u][r]), wf);
#pragma unroll
            for (int e = 0; e < E; ++e)
              acc[m][r] = fmaf(xf[e], wf[e], acc[m][r]);
          }
        }
      }
    }
  } else {
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float wv = r < rows ? elem_f32(w[r * K + k]) : 0.f;
#pragma unroll
        for (int m = 0; m < MM; ++m)
          if (m < M) acc[m][r] = fmaf(elem_f32(x[m * ldx + k]), wv, acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MM; ++m) {
    if (m >= M) break;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[m][r]);
      if (lane == 0) red[warp * (MM * R) + m * R + r] = v;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < M * R; i += blockDim.x) {
    float s = 0.f;
#pragma unroll
    for (int wp = 0; wp < kGemvWarps; ++wp)
      s += red[wp * (MM * R) + i];
    out_sm[i] = s;
  }
  __syncthreads();
}

}  // namespace strata::cuda
