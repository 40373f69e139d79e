// Bit-exact checks of the scalar conversions against values PyTorch produces for the same casts
// (torch.tensor(x).to(dtype).view(int) — the expected bit patterns below were worked out from
// the format definitions and agree with PyTorch's rounding: nearest, ties to even).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"

namespace strata {
namespace {

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even -> 1.0
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even) -> 1+2^-6
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(-2.5f), 0xc020);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()) & 0x7fc0, 0x7fc0);
  // the largest finite f32 rounds up to inf in bf16
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  // f32 subnormals keep their top bits
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
}

TEST(F16, RoundTripAndEdges) {
  EXPECT_EQ(f16_from_f32(1.0f), 0x3c00);
  EXPECT_EQ(f16_from_f32(65504.0f), 0x7bff);
  EXPECT_EQ(f16_from_f32(65519.0f), 0x7bff);               // below the midpoint to inf
  EXPECT_EQ(f16_from_f32(65520.0f), 0x7c00);               // midpoint: ties to even -> inf
  EXPECT_EQ(f16_from_f32(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_from_f32(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie -> 0 (even)
  EXPECT_EQ(f16_from_f32(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie -> 2 (even)
  EXPECT_EQ(f16_from_f32(-0.0f), 0x8000);
  EXPECT_EQ(f16_from_f32(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(f16_from_f32(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_TRUE(std::isnan(f16_to_f32(f16_from_f32(std::nanf("")))));
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  // every finite half round-trips exactly
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;
    ASSERT_EQ(f16_from_f32(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Fp8E4M3, DecodeTable) {
  EXPECT_EQ(fp8e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0xff)));
}

TEST(Fp8E4M3, EncodeMatchesTorch) {
  EXPECT_EQ(fp8e4m3_from_f32(1.0f), 0x38);
  EXPECT_EQ(fp8e4m3_from_f32(448.0f), 0x7e);
  EXPECT_EQ(fp8e4m3_from_f32(464.0f), 0x7e);  // tie between 448 and 480(NaN slot): even -> 448
  EXPECT_EQ(fp8e4m3_from_f32(470.0f), 0x7f);  // torch: NaN (no saturation in a plain cast)
  EXPECT_EQ(fp8e4m3_from_f32(1000.0f), 0x7f);
  EXPECT_EQ(fp8e4m3_from_f32(-1000.0f), 0xff);
  EXPECT_EQ(fp8e4m3_from_f32(std::numeric_limits<float>::infinity()), 0x7f);
  EXPECT_EQ(fp8e4m3_from_f32(std::nanf("")), 0x7f);
  EXPECT_EQ(fp8e4m3_from_f32(1.0625f), 0x38);  // 1 + 1/16: tie between 1 and 1.125 -> 1
  EXPECT_EQ(fp8e4m3_from_f32(1.1875f), 0x3a);  // 1 + 3/16: tie between 1.125 (odd) and 1.25
  EXPECT_EQ(fp8e4m3_from_f32(std::ldexp(1.0f, -10)), 0x00);   // half the smallest subnormal: -> 0
  EXPECT_EQ(fp8e4m3_from_f32(std::ldexp(3.0f, -10)), 0x02);   // 1.5 subnormal ulps: tie -> 2
  EXPECT_EQ(fp8e4m3_from_f32(std::ldexp(15.0f, -10)), 0x08);  // rounds up into the normals
  EXPECT_EQ(fp8e4m3_from_f32(-0.0f), 0x80);
  EXPECT_EQ(fp8e4m3_from_f32_sat(1000.0f), 0x7e);
  EXPECT_EQ(fp8e4m3_from_f32_sat(-1e30f), 0xfe);
  // every finite code round-trips
  for (uint32_t v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;
    ASSERT_EQ(fp8e4m3_from_f32(fp8e4m3_to_f32(static_cast<uint8_t>(v))), v) << v;
  }
}

TEST(E2M1, RoundingTable) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint8_t c = 0; c < 16; ++c) {
    const float v = e2m1_to_f32(c);
    EXPECT_EQ(v, (c & 8 ? -1 : 1) * mags[c & 7]);
    if (c != 8) {
      EXPECT_EQ(e2m1_from_f32(v), c);  // -0 encodes as 8 too
    }
  }
  EXPECT_EQ(e2m1_from_f32(0.25f), 0);  // tie -> 0
  EXPECT_EQ(e2m1_from_f32(0.26f), 1);
  EXPECT_EQ(e2m1_from_f32(0.75f), 2);  // tie -> 1.0
  EXPECT_EQ(e2m1_from_f32(1.25f), 2);  // tie -> 1.0
  EXPECT_EQ(e2m1_from_f32(1.75f), 4);  // tie -> 2.0
  EXPECT_EQ(e2m1_from_f32(2.5f), 4);   // tie -> 2.0
  EXPECT_EQ(e2m1_from_f32(3.5f), 6);   // tie -> 4.0
  EXPECT_EQ(e2m1_from_f32(5.0f), 6);   // tie -> 4.0
  EXPECT_EQ(e2m1_from_f32(5.01f), 7);
  EXPECT_EQ(e2m1_from_f32(100.f), 7);  // saturates
  EXPECT_EQ(e2m1_from_f32(-100.f), 15);
}

}  // namespace
}  // namespace strata
