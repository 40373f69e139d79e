// e4m3 codes -> f16 bits with integer operations only (no cvt), for the tensor-core kernels
// that feed e4m3 operands to f16 mma.sync (sm_90 has no e4m3 mma.sync of its own). Plain C++
// so the host tests run the very same bit conversion against the e4m3 decoder.
//
// An e4m3 code s eeee mmm (bias 7) placed at bits 14..7 of a 16-bit lane is the f16 pattern
// 0 s eeee mmm 0000000; adding the lane's bit 14 to itself carries the sign up to bit 15 and
// clears bit 14: s 0 eeee mmm 0000000, an f16 (bias 15) with the same exponent field and
// mantissa, i.e. exactly the e4m3 value times 2^-8 (subnormals too: both formats' subnormals
// have an exponent of 1 - bias). The NaN codes (0x7f, 0xff) become +-1.875 (480 x 2^-8): e4m3
// quantizers saturate to +-448 and never write them.
#pragma once

#include <cstdint>

#ifndef STRATA_HD
#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif
#endif

namespace strata::cuda {

// y: two e4m3 codes, one in the low byte of each 16-bit half (b0 | b1 << 16). Returns the f16x2
// word (b0 x 2^-8, b1 x 2^-8), low half first.
STRATA_HD inline uint32_t e4m3x2_spread_to_f16x2(uint32_t y) {
  const uint32_t x = y << 7;     // each code at bits 14..7 of its half
  return x + (x & 0x40004000u);  // sign: bit 14 -> bit 15 (no carry past the half)
}

// The spread of bytes (0, 1) or (2, 3) of a word of four codes.
STRATA_HD inline uint32_t e4m3_spread_lo(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(v, 0u, 0x4140);  // bytes: b0, 0, b1, 0
#else
  return (v & 0xffu) | ((v & 0xff00u) << 8);
#endif
}
STRATA_HD inline uint32_t e4m3_spread_hi(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(v, 0u, 0x4342);  // bytes: b2, 0, b3, 0
#else
  return ((v >> 16) & 0xffu) | ((v >> 8) & 0xff0000u);
#endif
}

}  // namespace strata::cuda
