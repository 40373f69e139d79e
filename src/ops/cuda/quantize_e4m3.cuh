// The e4m3 copy a producer kernel writes for a W8A8 linear (ops.h QuantizedOut, QuantOut in
// device_views.h): e4m3_sat(v / scale), byte for byte what the linear's own quantize pass
// (launch_quantize_fp8, a division) makes of the same act value.
//
// Without the division (measured on the H200, bench-kernels, relu2 out_q only at 512 x 3,712:
// 6.78 us dividing, 3.90 us here; docs/BENCHMARKS.md, branch fuse5): a division is a reciprocal
// estimate, corrections and a range check (FCHK) whose slow path zeros take too, and relu2's
// outputs are half zeros. Here rcp = RN(1 / scale) comes from the host, q0 = RN(v * rcp), and
// each correction q' = RN(q + (v - q * scale) * rcp) computes the residual exactly (FMA). The
// first correction leaves a faithful quotient; the second then rounds correctly: Markstein's
// theorem (a faithful quotient corrected once with the correctly rounded reciprocal gives
// RN(v / scale)) wherever the quotient is a finite normal f32. Zero keeps its sign (v itself); a
// non-finite result (|v| beyond ~scale x 2^128, or v inf / NaN) takes the division; quotients
// below 2^-126 are e4m3 zeros of v's sign either way. The op harness checks every produced byte
// against the host's division (tests/ops/cases_w8a8_inputs.cpp).
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/device_views.h"

namespace strata::cuda {

// The kernels' view of QuantOut, with the reciprocal of the scale.
struct QDev {
  uint8_t* p = nullptr;  // null: no copy
  int64_t ld = 0;        // bytes
  float scale = 1.f;
  float rcp = 1.f;  // RN(1 / scale)
};

inline QDev qdev_of(const QuantOut& q) {
  QDev d;
  d.p = static_cast<uint8_t*>(q.p);
  d.ld = q.ld;
  d.scale = q.scale;
  d.rcp = 1.f / q.scale;  // host f32 division: correctly rounded
  return d;
}

__device__ __forceinline__ uint8_t quantize_e4m3(const QDev& q, float v) {
  float d = v * q.rcp;
  d = fmaf(fmaf(-d, q.scale, v), q.rcp, d);
  d = fmaf(fmaf(-d, q.scale, v), q.rcp, d);
  if (!isfinite(d)) d = v / q.scale;
  return f32_to_fp8_sat(v == 0.f ? v : d);
}

// V (4 or 8) act values -> V e4m3 bytes at dst (V-byte aligned), one store.
template <class T, int V>
__device__ __forceinline__ void store_e4m3(const QDev& q, uint8_t* dst, const T (&v)[V]) {
  static_assert(V == 4 || V == 8, "one 4- or 8-byte store");
  uint32_t w[V / 4] = {};
#pragma unroll
  for (int i = 0; i < V; ++i)
    w[i / 4] |= static_cast<uint32_t>(quantize_e4m3(q, to_f32(v[i]))) << (8 * (i % 4));
  if constexpr (V == 8)
    *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
  else
    *reinterpret_cast<uint32_t*>(dst) = w[0];
}

}  // namespace strata::cuda
