// The random draw of the sampler, shared bit for bit by the host kernel and the CUDA kernel:
// a counter-based generator (no state), so the uniform of a row depends only on the request's
// seed and the index of the token being sampled, never on batch composition or thread order.
//
// Construction: two rounds of the splitmix64 finalizer (a bijection on 64-bit words),
//   h = mix(mix(seed + golden) ^ (step * odd_constant + golden2))
// and the top 24 bits of h become a float in [0, 1) exactly (24 bits fit the f32 significand,
// so no rounding can reach 1.0). Only integer operations and one exact int->float conversion:
// host and device produce the same bits.
#pragma once

#include <cstdint>

#ifndef STRATA_HD
#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif
#endif

namespace strata::ops {

// splitmix64's output function (Steele, Lea, Flood 2014): full avalanche, invertible.
STRATA_HD inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64 random bits for (seed, step).
STRATA_HD inline uint64_t sampling_bits(uint64_t seed, uint64_t step) {
  const uint64_t k = splitmix64_mix(seed + 0x9E3779B97F4A7C15ull);
  return splitmix64_mix(k ^ (step * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
}

// Uniform float in [0, 1) with 24 random bits: the value the sampler compares with the
// cumulative mass (name kept from the op table's contract; the generator is splitmix64).
STRATA_HD inline float philox_or_splitmix(uint64_t seed, uint64_t step) {
  return static_cast<float>(sampling_bits(seed, step) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace strata::ops
