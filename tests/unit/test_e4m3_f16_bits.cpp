// The integer e4m3 -> f16 conversion of the swapped MoE GEMMs (src/ops/cuda/e4m3_f16_bits.h,
// the same functions the kernel runs) against the host e4m3 decoder: every code in every byte
// position of a word, each next to every other code, must become exactly its value times 2^-8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/e4m3_f16_bits.h"

namespace strata {
namespace {

// The f16 value the conversion must produce for code b: e4m3 x 2^-8, NaN codes as +-1.875.
float expected_f16(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return (b & 0x80u) ? -1.875f : 1.875f;
  return std::ldexp(fp8e4m3_to_f32(b), -8);
}

TEST(E4m3F16Bits, EveryCodeInEveryPositionIsExact) {
  int64_t compared = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    for (uint32_t o = 0; o < 256; ++o) {
      // b in byte `pos`, o in the other bytes: the neighbours must not leak into b's half.
      for (int pos = 0; pos < 4; ++pos) {
        uint32_t v = o * 0x01010101u;
        v = (v & ~(0xffu << (8 * pos))) | (b << (8 * pos));
        const uint32_t w = cuda::e4m3x2_spread_to_f16x2(pos < 2 ? cuda::e4m3_spread_lo(v)
                                                                : cuda::e4m3_spread_hi(v));
        const uint16_t half = static_cast<uint16_t>(pos % 2 == 0 ? w & 0xffffu : w >> 16);
        const float got = f16_to_f32(half), want = expected_f16(static_cast<uint8_t>(b));
        ASSERT_EQ(got, want) << "code 0x" << std::hex << b << " at byte " << pos << " next to 0x"
                             << o << ": f16 bits 0x" << half;
        // Signed zero keeps its sign (the f16 bit pattern, not only the value).
        if ((b & 0x7fu) == 0) {
          ASSERT_EQ(half, (b & 0x80u) ? 0x8000 : 0x0000);
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 256 * 256 * 4);
}

TEST(E4m3F16Bits, KnownValues) {
  // 448 (0x7e) -> 1.75; the smallest subnormal 2^-9 (0x01) -> 2^-17; -1 (0xb8) -> -2^-8.
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(cuda::e4m3x2_spread_to_f16x2(0x7eu))), 1.75f);
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(cuda::e4m3x2_spread_to_f16x2(0x01u))),
            std::ldexp(1.f, -17));
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(cuda::e4m3x2_spread_to_f16x2(0xb8u))),
            -std::ldexp(1.f, -8));
}

}  // namespace
}  // namespace strata
