// Host linear against a float64 matrix product on random inputs: f32, bf16 and f8e4m3 weights,
// f32 and bf16 outputs, row views (row stride > width) on input and output.
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

struct LinearCase {
  int64_t T, K, N;
  DType x_dtype, w_dtype, out_dtype;
  float weight_scale;
};

void run_linear_case(const LinearCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} K={} N={} x={} w={} out={}", c.T, c.K, c.N, dtype_name(c.x_dtype),
                           dtype_name(c.w_dtype), dtype_name(c.out_dtype)));
  std::mt19937_64 rng(seed);
  // x is a view into a wider row (as a slice of an in_proj output); so is out.
  WideRows x = wide_rows(c.T, c.K, 5, 3, c.x_dtype);
  fill_normal(x.wide, rng);
  Tensor w = random_tensor({c.N, c.K}, c.w_dtype, rng, c.w_dtype == DType::F8E4M3 ? 2.0 : 0.2);
  WideRows out = wide_rows(c.T, c.N, 4, 1, c.out_dtype);

  ops::LinearArgs a;
  a.x = x.view;
  a.w.weight = w;
  a.w.weight_scale = c.weight_scale;
  a.w.input_scale = 0.5f;  // ignored on the host (W8A16 reference)
  a.out = out.view;
  OpContext ctx;
  ops::run(ctx, a);

  // Reference: y = sum_k x * W (* weight_scale for f8e4m3), in f64. The kernel's error:
  // f32 accumulation of K products (f32_band with K + 2 roundings incl. product and scale)
  // plus one rounding when storing y in out's dtype.
  const double scale = c.w_dtype == DType::F8E4M3 ? c.weight_scale : 1.0;
  Comparison cmp;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t n = 0; n < c.N; ++n) {
      double y = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = get(x.view, {t, k}) * get(w, {n, k}) * scale;
        y += p;
        mag += std::fabs(p);
      }
      const double tol = f32_band(mag, c.K + 2) + unit_roundoff(c.out_dtype) * std::fabs(y);
      cmp.check(get(out.view, {t, n}), y, tol, fmt::format("out[{}, {}]", t, n));
    }
  EXPECT_EQ(cmp.compared, c.T * c.N);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(out.touched_guards(), 0) << "linear wrote outside its output view";
}

TEST(HostLinear, MatchesFloat64AcrossShapesAndDtypes) {
  const DType f32 = DType::F32, bf16 = DType::BF16, fp8 = DType::F8E4M3;
  const LinearCase cases[] = {
      {1, 1, 1, f32, f32, f32, 1.f},       {3, 17, 5, f32, f32, f32, 1.f},
      {7, 64, 33, bf16, bf16, bf16, 1.f},  {16, 100, 70, bf16, bf16, f32, 1.f},
      {5, 31, 9, bf16, fp8, bf16, 0.037f}, {4, 72, 19, f32, fp8, f32, 0.25f},
      {2, 257, 3, bf16, f32, bf16, 1.f},   {9, 40, 41, DType::F16, DType::F16, DType::F16, 1.f},
  };
  uint64_t seed = 100;
  for (const auto& c : cases)
    run_linear_case(c, seed++);
}

TEST(HostLinear, EmptyTokenBatchWritesNothing) {
  std::mt19937_64 rng(7);
  ops::LinearArgs a;
  a.x = Tensor::empty({0, 8}, DType::F32);
  a.w.weight = random_tensor({4, 8}, DType::F32, rng);
  a.out = Tensor::empty({0, 4}, DType::F32);
  OpContext ctx;
  EXPECT_NO_THROW(ops::run(ctx, a));
}

TEST(HostLinear, SupportsRejectsBadArgumentsWithReasons) {
  std::mt19937_64 rng(8);
  OpContext ctx;
  ops::LinearArgs a;
  a.x = random_tensor({2, 8}, DType::F32, rng);
  a.w.weight = random_tensor({4, 9}, DType::F32, rng);  // K mismatch
  a.out = Tensor::empty({2, 4}, DType::F32);
  try {
    ops::run(ctx, a);
    FAIL() << "K mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
  a.w.weight = random_tensor({4, 8}, DType::F32, rng);
  a.out = Tensor::empty({2, 4}, DType::I32);
  EXPECT_THROW(ops::run(ctx, a), Error);
  a.out = Tensor::empty({2, 4}, DType::F32);
  a.w.weight = Tensor::empty({4, 8}, DType::F8E4M3);
  a.w.weight_scale = 0.f;
  EXPECT_THROW(ops::run(ctx, a), Error);
  // A transposed view (inner stride != 1) is not a row view.
  Tensor xt = random_tensor({8, 2}, DType::F32, rng);
  a.w.weight = random_tensor({4, 8}, DType::F32, rng);
  a.x = xt.with_shape_strides({2, 8}, {1, 2});
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
