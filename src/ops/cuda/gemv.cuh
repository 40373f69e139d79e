// Building blocks of the memory-bound matrix-vector kernels (small-M linear, MoE decode):
// 16-byte weight chunks unpacked to f32 (bf16 by shifts, e4m3 through the hardware fp8x2 ->
// half2 conversion), and a warp's partial dot product of one weight row with one x row.
#pragma once

#include "ops/cuda/common.cuh"

namespace strata::cuda {

__device__ __forceinline__ float elem_f32(float v) { return v; }
__device__ __forceinline__ float elem_f32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float elem_f32(uint8_t v) { return fp8_to_f32(v); }

// Unpacks E consecutive values of type T held in `raw` (E * sizeof(T) bytes) to f32.
template <class T, int E>
__device__ __forceinline__ void unpack(const uint32_t* raw, float* out) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = __uint_as_float(raw[e]);
  } else if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int e = 0; e < E / 2; ++e) {
      out[2 * e] = __uint_as_float(raw[e] << 16);
      out[2 * e + 1] = __uint_as_float(raw[e] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < E / 4; ++e) {
      const uint32_t v = raw[e];
      const __half2 lo(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3));
      const __half2 hi(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3));
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
  const int64_t xb = E * static_cast<int64_t>(sizeof(TX)) < 16 ? E * static_cast<int64_t>(sizeof(TX)) : 16;
  return K % E == 0 && (reinterpret_cast<uintptr_t>(w) & 15u) == 0 &&
         (K * static_cast<int64_t>(sizeof(TW))) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % static_cast<uintptr_t>(xb) == 0 &&
         (ldx * static_cast<int64_t>(sizeof(TX))) % xb == 0;
}

// This lane's share of x[0:K] . w[0:K] (reduce over the warp afterwards). VEC: chunked loads,
// four chunks in flight; otherwise element loads (any K, any alignment).
template <class TX, class TW, bool VEC>
__device__ __forceinline__ float lane_dot(const TX* __restrict__ x, const TW* __restrict__ w, int64_t K, int lane) {
  float acc = 0.f;
  if constexpr (VEC) {
    constexpr int E = chunk_elems<TW>();
    constexpr int kUnroll = 4;
    const uint4* wr = reinterpret_cast<const uint4*>(w);
    const int64_t chunks = K / E;
    int64_t c = lane;
    auto consume = [&](const uint4& wv, int64_t chunk) {
      float wf[E], xf[E];
      unpack<TW, E>(reinterpret_cast<const uint32_t*>(&wv), wf);
      load_vals<TX, E>(x + chunk * E, xf);
#pragma unroll
      for (int e = 0; e < E; ++e) acc = fmaf(xf[e], wf[e], acc);
    };
    for (; c + 32 * (kUnroll - 1) < chunks; c += 32 * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + c + 32 * u);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) consume(wv[u], c + 32 * u);
    }
    for (; c < chunks; c += 32) consume(__ldcs(wr + c), c);
  } else {
    for (int64_t k = lane; k < K; k += 32) acc = fmaf(elem_f32(x[k]), elem_f32(w[k]), acc);
  }
  return acc;
}

}  // namespace strata::cuda
