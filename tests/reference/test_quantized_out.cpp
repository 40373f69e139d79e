// Host ops with the e4m3 copy of their output for a W8A8 linear (ops.h QuantizedOut), and the
// host linear taking that copy. The copy must be byte for byte e4m3_sat(out / scale) of the same
// op's act output (what the linear's own quantization makes of it), with or without the act
// output written; the act output must not change.
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

constexpr float kScale = 2.5f / 448.f;  // ~1% of N(0, 1) values saturate

// Runs `make(out, out_q)` three ways (act only, both, e4m3 only) and checks the outputs agree.
template <class Args, class Make>
void check_three_ways(int64_t T, int64_t N, DType act, Make make) {
  Tensor out_plain = Tensor::empty({T, N}, act), out_both = Tensor::empty({T, N}, act);
  Tensor q_both = Tensor::empty({T, N}, DType::F8E4M3),
         q_only = Tensor::empty({T, N}, DType::F8E4M3);
  OpContext ctx;
  Args a = make();
  a.out = out_plain;
  ops::run(ctx, a);
  a = make();
  a.out = out_both;
  a.out_q = q_both;
  a.out_q_scale = kScale;
  ops::run(ctx, a);
  a = make();
  a.out = Tensor();
  a.out_q = q_only;
  a.out_q_scale = kScale;
  ops::run(ctx, a);
  int64_t compared = 0, saturated = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double o = get(out_plain, {t, n});
      ASSERT_EQ(o, get(out_both, {t, n})) << "out changed at " << t << ", " << n;
      const uint8_t want = fp8e4m3_from_f32_sat(static_cast<float>(o) / kScale);
      const size_t i = static_cast<size_t>(t * N + n);
      ASSERT_EQ(q_both.data<uint8_t>()[i], want) << "out_q at " << t << ", " << n;
      ASSERT_EQ(q_only.data<uint8_t>()[i], want) << "out_q only at " << t << ", " << n;
      saturated += (want & 0x7f) == 0x7e ? 1 : 0;  // +-448
      ++compared;
    }
  EXPECT_EQ(compared, T * N);
  EXPECT_GT(saturated, 0) << "no value saturates: the case misses the saturation";
}

TEST(HostQuantizedOut, RmsNormWritesTheQuantizedOutput) {
  for (DType act : {DType::BF16, DType::F32}) {
    std::mt19937_64 rng(3);
    const int64_t T = 5, H = 257;
    const Tensor x = random_tensor({T, H}, act, rng), x2 = random_tensor({T, H}, act, rng);
    const Tensor r = random_tensor({T, H}, act, rng), w = random_tensor({H}, act, rng);
    check_three_ways<ops::RmsNormArgs>(T, H, act, [&] {
      ops::RmsNormArgs a;
      a.x = x;
      a.x2 = x2;
      a.residual = clone(r);  // each run starts from the same residual
      a.weight = w;
      return a;
    });
  }
}

TEST(HostQuantizedOut, GatedRmsNormWritesTheQuantizedOutput) {
  for (DType act : {DType::BF16, DType::F32}) {
    std::mt19937_64 rng(4);
    const int64_t T = 3, D = 384;
    const Tensor y = random_tensor({T, D}, act, rng), z = random_tensor({T, D}, act, rng);
    const Tensor w = random_tensor({D}, act, rng);
    check_three_ways<ops::GatedRmsNormArgs>(T, D, act, [&] {
      ops::GatedRmsNormArgs a;
      a.y = y;
      a.z = z;
      a.weight = w;
      a.groups = 3;
      return a;
    });
  }
}

TEST(HostQuantizedOut, Relu2WritesTheQuantizedOutput) {
  for (DType act : {DType::BF16, DType::F32}) {
    std::mt19937_64 rng(5);
    const Tensor x = random_tensor({7, 131}, act, rng, 1.5);
    check_three_ways<ops::Relu2Args>(7, 131, act, [&] {
      ops::Relu2Args a;
      a.x = x;
      return a;
    });
  }
}

TEST(HostQuantizedOut, LinearTakesE4m3XForW8A8Weights) {
  std::mt19937_64 rng(6);
  const int64_t T = 3, N = 17, K = 96;
  Tensor xq = Tensor::empty({T, K}, DType::F8E4M3), xd = Tensor::empty({T, K}, DType::F32);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < T * K; ++i) {
    xq.data<uint8_t>()[i] = fp8e4m3_from_f32_sat(nd(rng) / kScale);
    xd.data<float>()[i] = fp8e4m3_to_f32(xq.data<uint8_t>()[i]) * kScale;  // dequantized
  }
  ops::LinearArgs a;
  a.w.weight = Tensor::empty({N, K}, DType::F8E4M3);
  for (int64_t i = 0; i < N * K; ++i)
    a.w.weight.data<uint8_t>()[i] = fp8e4m3_from_f32_sat(nd(rng) * 64.f);
  a.w.weight_scale = 1.f / 512.f;
  a.w.input_scale = kScale;
  OpContext ctx;
  a.x = xq;
  a.out = Tensor::empty({T, N}, DType::F32);
  ops::run(ctx, a);
  const Tensor got = a.out;
  a.x = xd;  // the W8A16 reference on the dequantized x: the same sums up to f32 rounding
  a.out = Tensor::empty({T, N}, DType::F32);
  ops::run(ctx, a);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::fabs(get(xd, {t, k}) * fp8e4m3_to_f32(a.w.weight.data<uint8_t>()[n * K + k]) *
                         a.w.weight_scale);
      EXPECT_NEAR(get(got, {t, n}), get(a.out, {t, n}), f32_band(mag, K + 4)) << t << ", " << n;
    }
  // e4m3 x needs the input_scale it was quantized with.
  a.x = xq;
  a.w.input_scale = 0.f;
  EXPECT_THROW(ops::run(ctx, a), Error);
}

TEST(HostQuantizedOut, RefusesNeitherOutputAndBadCopies) {
  std::mt19937_64 rng(7);
  OpContext ctx;
  ops::Relu2Args a;
  a.x = random_tensor({2, 8}, DType::BF16, rng);
  EXPECT_THROW(ops::run(ctx, a), Error);  // neither out nor out_q
  a.out_q = Tensor::empty({2, 8}, DType::BF16);
  a.out_q_scale = kScale;
  EXPECT_THROW(ops::run(ctx, a), Error);  // out_q not e4m3
  a.out_q = Tensor::empty({2, 8}, DType::F8E4M3);
  a.out_q_scale = 0.f;
  EXPECT_THROW(ops::run(ctx, a), Error);  // no scale
  a.out_q_scale = kScale;
  EXPECT_NO_THROW(ops::run(ctx, a));
}

}  // namespace
}  // namespace strata::reftest
