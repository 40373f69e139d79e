// Host relu2, add and cast against float64 on random data (including in-place use).
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

// relu2: one f32 square (2^-24) and one store in act: relative band u_act + 2^-24.
void run_relu2_case(int64_t T, int64_t N, DType act, bool in_place, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} N={} act={} in_place={}", T, N, dtype_name(act), in_place));
  std::mt19937_64 rng(seed);
  WideRows x = wide_rows(T, N, 3, 1, act);
  fill_normal(x.wide, rng, 2.0);
  const Tensor x0 = clone(x.view);
  WideRows out = wide_rows(T, N, 1, 0, act);
  ops::Relu2Args a;
  a.x = x.view;
  a.out = in_place ? x.view : out.view;
  OpContext ctx;
  ops::run(ctx, a);
  Comparison cmp;
  int64_t negatives = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double v = get(x0, {t, n});
      negatives += v < 0;
      const double want = v > 0 ? v * v : 0.0;
      cmp.check(get(a.out, {t, n}), want, want * (unit_roundoff(act) + std::ldexp(1.0, -24)),
                fmt::format("out[{}, {}]", t, n));
    }
  EXPECT_EQ(cmp.compared, T * N);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_GT(negatives, 0) << "the data must exercise the relu";
  if (!in_place) {
    EXPECT_EQ(out.touched_guards(), 0);
  }
}

TEST(HostRelu2, MatchesFloat64) {
  run_relu2_case(3, 17, DType::F32, false, 1);
  run_relu2_case(5, 64, DType::BF16, false, 2);
  run_relu2_case(4, 9, DType::BF16, true, 3);
  run_relu2_case(1, 1000, DType::F32, true, 4);
}

// add: one f32 add (2^-24 of |a|+|b|) then one store in act (u_act of the sum).
void run_add_case(int64_t T, int64_t N, DType act, bool in_place, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} N={} act={} in_place={}", T, N, dtype_name(act), in_place));
  std::mt19937_64 rng(seed);
  Tensor a_t = random_tensor({T, N}, act, rng);
  WideRows b = wide_rows(T, N, 2, 2, act);
  fill_normal(b.wide, rng);
  const Tensor a0 = clone(a_t), b0 = clone(b.view);
  ops::AddArgs a;
  a.a = a_t;
  a.b = b.view;
  a.out = in_place ? a_t : Tensor::empty({T, N}, act);
  if (!in_place) poison(a.out);
  OpContext ctx;
  ops::run(ctx, a);
  Comparison cmp;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double x = get(a0, {t, n}), y = get(b0, {t, n});
      const double tol = std::ldexp(1.0, -24) * (std::fabs(x) + std::fabs(y)) +
                         unit_roundoff(act) * std::fabs(x + y);
      cmp.check(get(a.out, {t, n}), x + y, tol, fmt::format("out[{}, {}]", t, n));
    }
  EXPECT_EQ(cmp.compared, T * N);
  EXPECT_EQ(cmp.failed, 0);
}

TEST(HostAdd, MatchesFloat64) {
  run_add_case(3, 17, DType::F32, false, 5);
  run_add_case(6, 40, DType::BF16, false, 6);
  run_add_case(2, 5, DType::BF16, true, 7);
}

TEST(HostAdd, ShapeMismatchIsRejected) {
  std::mt19937_64 rng(8);
  ops::AddArgs a;
  a.a = random_tensor({2, 3}, DType::F32, rng);
  a.b = random_tensor({3, 2}, DType::F32, rng);
  a.out = Tensor::empty({2, 3}, DType::F32);
  OpContext ctx;
  EXPECT_THROW(ops::run(ctx, a), Error);
}

// cast: one rounding to the target dtype (exact when widening).
void run_cast_case(const Shape& s, DType from, DType to, uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} {} -> {}", s.str(), dtype_name(from), dtype_name(to)));
  std::mt19937_64 rng(seed);
  Tensor x = random_tensor(s, from, rng, 3.0);
  ops::CastArgs a;
  a.x = x;
  a.out = Tensor::empty(s, to);
  poison(a.out);
  OpContext ctx;
  ops::run(ctx, a);
  Comparison cmp;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double want = load_as_f64(x.raw(), from, static_cast<size_t>(i));
    const double got = load_as_f64(a.out.raw(), to, static_cast<size_t>(i));
    cmp.check(got, want, unit_roundoff(to) * std::fabs(want), fmt::format("element {}", i));
  }
  EXPECT_EQ(cmp.compared, s.numel());
  EXPECT_EQ(cmp.failed, 0);
}

TEST(HostCast, ConvertsBetweenFloatDtypes) {
  run_cast_case({3, 5}, DType::BF16, DType::F32, 9);
  run_cast_case({10000}, DType::F32, DType::BF16, 10);  // several 4096-element blocks
  run_cast_case({2, 3, 7}, DType::F32, DType::F16, 11);
  run_cast_case({4, 4}, DType::F16, DType::BF16, 12);
  run_cast_case({17}, DType::F64, DType::F32, 13);
  run_cast_case({6}, DType::F32, DType::F32, 14);
}

TEST(HostCast, RefusesDoubleRoundingAndShapeMismatch) {
  OpContext ctx;
  ops::CastArgs a;
  a.x = Tensor::zeros({4}, DType::F64);
  a.out = Tensor::empty({4}, DType::BF16);
  EXPECT_THROW(ops::run(ctx, a), Error);
  a.x = Tensor::zeros({4}, DType::F32);
  a.out = Tensor::empty({5}, DType::BF16);
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
