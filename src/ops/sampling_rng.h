// The random draw of the sampler, shared bit for bit by the host kernel and the CUDA kernel:
// a counter-based generator (no state), so the noise of a row depends only on the request's
// seed, the index of the token being sampled and the vocabulary id, never on batch
// composition or thread order.
//
// Construction: two rounds of the splitmix64 finalizer (a bijection on 64-bit words),
//   key = mix(mix(seed + golden) ^ (step * odd_constant + golden2))      one per row
// then splitmix64's stream seeded by `key`: bits(v) = mix(key + (v + 1) * golden) per token v.
// Uniforms are made from the bits by exact integer->float conversions, so host and device
// hold the same uniform; only the log of the Gumbel noise may differ (by an ulp of a double).
#pragma once

#include <cmath>
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

// The Gumbel noise of token `v` for a row with key sampling_bits(seed, step):
//   u = (top 52 bits + 1/2) / 2^52, in (0, 1) exactly (k + 1/2 with k < 2^52 fits a double's
//   53-bit significand, so u never rounds to 0 or 1), noise = -log(-log(u)) in [-3.6, 36.7].
// argmax_v (z_v / T + noise_v) is a draw from softmax(z / T) (the Gumbel-max trick; the
// exponential race vLLM uses, probs / Exp(1), is the same draw).
STRATA_HD inline double gumbel_uniform(uint64_t row_key, int64_t v) {
  const uint64_t bits =
      splitmix64_mix(row_key + (static_cast<uint64_t>(v) + 1) * 0x9E3779B97F4A7C15ull);
  return (static_cast<double>(bits >> 12) + 0.5) * (1.0 / 4503599627370496.0);
}
STRATA_HD inline double gumbel_noise(uint64_t row_key, int64_t v) {
  return -log(-log(gumbel_uniform(row_key, v)));
}

// A cheap exact bound for skipping the two logs: u <= 0.98 gives noise <= -log(-log(0.98)) =
// 3.902 < 4, so a token whose z / T is more than 4 below a race value already seen cannot win.
constexpr double kGumbelSkipGap = 4.0;
constexpr double kGumbelSkipUniform = 0.98;

}  // namespace strata::ops
