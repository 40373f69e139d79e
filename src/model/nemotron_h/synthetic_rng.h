// The element generator of synthetic weights, shared bit for bit by the host (make_synthetic_
// weights, `strata make-checkpoint`) and the device (`--load-format dummy`): counter-based, so
// element i of a tensor depends only on the tensor's seed and i, never on thread or launch order.
//
// "Symmetric" values are Irwin-Hall sums of four 16-bit uniforms, centred and scaled to the
// wanted standard deviation: close to a normal, but bounded by 2*sqrt(3)*std, which gives FP8
// weights an exact per-tensor scale. Only integer operations, one exact int->float conversion
// and one multiplication (or one fused multiply-add for uniforms) are used, all correctly
// rounded in IEEE f32 on both sides, so host and device produce the same bits.
#pragma once

#include <cstdint>

#include "ops/sampling_rng.h"  // STRATA_HD, splitmix64_mix

namespace strata::model {

// 64 random bits for element i of the tensor with `seed`.
STRATA_HD inline uint64_t synth_bits(uint64_t seed, uint64_t i) {
  return ops::splitmix64_mix(seed ^ ops::splitmix64_mix(i + 0x632BE59BD9B4E019ull));
}

// Sum of the four 16-bit fields (each read as k + 1/2, uniform on (0, 65536)) minus their mean
// 4 * 32768: an exact integer in [-131070, 131070].
STRATA_HD inline int32_t synth_centered(uint64_t seed, uint64_t i) {
  const uint64_t h = synth_bits(seed, i);
  const int32_t s = static_cast<int32_t>(h & 0xffff) + static_cast<int32_t>((h >> 16) & 0xffff) +
                    static_cast<int32_t>((h >> 32) & 0xffff) + static_cast<int32_t>(h >> 48);
  return s - 131070;
}

// The multiplier that turns synth_centered into a value of standard deviation `std`: each
// 16-bit field has variance ~65536^2/12, four of them 65536^2/3, so k = std * sqrt(3) / 65536.
inline float synth_symmetric_multiplier(double std) {
  return static_cast<float>(std * 1.7320508075688772 / 65536.0);
}
// The largest |value| a symmetric tensor of multiplier k can hold.
inline double synth_symmetric_bound(float k) {
  return 131070.0 * static_cast<double>(k);
}

STRATA_HD inline float synth_symmetric(uint64_t seed, uint64_t i, float k) {
  return static_cast<float>(synth_centered(seed, i)) * k;
}

// Uniform in [lo, lo + span) from 24 random bits.
STRATA_HD inline float synth_uniform(uint64_t seed, uint64_t i, float lo, float span) {
  const float u = static_cast<float>(synth_bits(seed, i) >> 40) * (1.0f / 16777216.0f);
#if defined(__CUDA_ARCH__)
  return fmaf(span, u, lo);
#else
  return __builtin_fmaf(span, u, lo);
#endif
}

}  // namespace strata::model
