// Host rms_norm (plain and with the fused residual add) and gated_rms_norm against float64.
//
// Bands (first-order error propagation; the factor 1.05 covers second-order terms, which are
// below 1% of the bands here):
// - residual store: the sum x + r is rounded once to the residual's dtype: |dv| <= u_r (|x|+|r|).
// - 1/rms: relative error from the rounded v of at most u_r * sum|v|(|x|+|r|) / sum v^2, plus
//   the f32 sum of squares, mean, sqrt and divide: (H + 8) * 2^-24.
// - the normalized value is stored in act (u_act), multiplied by the weight and stored again
//   (u_act): two roundings of the output's magnitude.
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

constexpr double kSecondOrder = 1.05;

struct NormCase {
  int64_t T, H;
  DType act;
  bool residual;
  bool out_aliases_x;
  float eps;
};

void run_rms_norm_case(const NormCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} H={} act={} residual={} alias={}", c.T, c.H, dtype_name(c.act),
                           c.residual, c.out_aliases_x));
  std::mt19937_64 rng(seed);
  WideRows x = wide_rows(c.T, c.H, 2, 1, c.act);
  fill_normal(x.wide, rng, 1.5);
  Tensor res = c.residual ? random_tensor({c.T, c.H}, c.act, rng, 2.0) : Tensor();
  Tensor w = random_tensor({c.H}, c.act, rng, 1.0);
  // Copies of the inputs: the kernel overwrites the residual (and x when out aliases it).
  const Tensor x0 = clone(x.view);
  const Tensor r0 = c.residual ? clone(res) : Tensor();
  WideRows out_buf = wide_rows(c.T, c.H, 3, 0, c.act);

  ops::RmsNormArgs a;
  a.x = x.view;
  a.residual = res;
  a.weight = w;
  a.eps = c.eps;
  a.out = c.out_aliases_x ? x.view : out_buf.view;
  OpContext ctx;
  ops::run(ctx, a);

  const double u_act = unit_roundoff(c.act);
  const double u_r = c.residual ? unit_roundoff(c.act) + std::ldexp(1.0, -24) : 0.0;
  Comparison cmp, cmp_res;
  for (int64_t t = 0; t < c.T; ++t) {
    std::vector<double> v(static_cast<size_t>(c.H)), mag(static_cast<size_t>(c.H));
    double ss = 0, cross = 0;
    for (int64_t h = 0; h < c.H; ++h) {
      const double xv = get(x0, {t, h}), rv = c.residual ? get(r0, {t, h}) : 0.0;
      v[h] = xv + rv;
      mag[h] = std::fabs(xv) + std::fabs(rv);
      ss += v[h] * v[h];
      cross += std::fabs(v[h]) * mag[h];
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.H) + c.eps);
    const double rel_inv = u_r * cross / ss + static_cast<double>(c.H + 8) * std::ldexp(1.0, -24);
    for (int64_t h = 0; h < c.H; ++h) {
      const double wv = get(w, {h});
      const double y = v[h] * inv * wv;
      const double tol =
          kSecondOrder * (std::fabs(y) * (rel_inv + 2 * u_act + 4 * std::ldexp(1.0, -24)) +
                          mag[h] * u_r * inv * std::fabs(wv));
      cmp.check(get(a.out, {t, h}), y, tol, fmt::format("out[{}, {}]", t, h));
      if (c.residual)
        cmp_res.check(get(res, {t, h}), v[h], u_r * mag[h], fmt::format("residual[{}, {}]", t, h));
    }
  }
  EXPECT_EQ(cmp.compared, c.T * c.H);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(cmp_res.compared, c.residual ? c.T * c.H : 0);
  EXPECT_EQ(cmp_res.failed, 0);
  if (!c.out_aliases_x) {
    EXPECT_EQ(out_buf.touched_guards(), 0);
  }
}

TEST(HostRmsNorm, MatchesFloat64) {
  const NormCase cases[] = {
      {1, 1, DType::F32, false, false, 1e-5f},  {3, 17, DType::F32, false, false, 1e-5f},
      {5, 64, DType::F32, true, false, 1e-6f},  {4, 48, DType::BF16, false, false, 1e-5f},
      {6, 96, DType::BF16, true, false, 1e-5f}, {3, 33, DType::BF16, true, true, 1e-5f},
      {2, 20, DType::F32, true, true, 1e-2f},   {7, 130, DType::F16, true, false, 1e-5f},
  };
  uint64_t seed = 11;
  for (const auto& c : cases)
    run_rms_norm_case(c, seed++);
}

struct GatedCase {
  int64_t T, D, groups;
  DType act;
};

// Gated: g = y * silu(z) in f32 (about six roundings: exp, add, divide, multiplies), then the
// per-group normalization with the same bands as above (no residual).
void run_gated_case(const GatedCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} D={} groups={} act={}", c.T, c.D, c.groups, dtype_name(c.act)));
  std::mt19937_64 rng(seed);
  Tensor y = random_tensor({c.T, c.D}, c.act, rng);
  WideRows z = wide_rows(c.T, c.D, 7, 5, c.act);  // z is a row view into the in_proj output
  fill_normal(z.wide, rng, 1.5);
  Tensor w = random_tensor({c.D}, c.act, rng);
  WideRows out = wide_rows(c.T, c.D, 2, 2, c.act);

  ops::GatedRmsNormArgs a;
  a.y = y;
  a.z = z.view;
  a.weight = w;
  a.groups = c.groups;
  a.eps = 1e-5f;
  a.out = out.view;
  OpContext ctx;
  ops::run(ctx, a);

  const int64_t gs = c.D / c.groups;
  const double u_act = unit_roundoff(c.act);
  Comparison cmp;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t g = 0; g < c.groups; ++g) {
      std::vector<double> v(static_cast<size_t>(gs));
      double ss = 0;
      for (int64_t i = 0; i < gs; ++i) {
        const double zv = get(z.view, {t, g * gs + i});
        v[i] = get(y, {t, g * gs + i}) * zv / (1.0 + std::exp(-zv));
        ss += v[i] * v[i];
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(gs) + 1e-5);
      for (int64_t i = 0; i < gs; ++i) {
        const int64_t d = g * gs + i;
        const double want = v[i] * inv * get(w, {d});
        const double tol = kSecondOrder * std::fabs(want) *
                           (static_cast<double>(gs + 20) * std::ldexp(1.0, -24) + 2 * u_act);
        cmp.check(get(out.view, {t, d}), want, tol, fmt::format("out[{}, {}]", t, d));
      }
    }
  EXPECT_EQ(cmp.compared, c.T * c.D);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(out.touched_guards(), 0);
}

TEST(HostGatedRmsNorm, NormalizesPerGroupAfterGating) {
  const GatedCase cases[] = {
      {3, 24, 1, DType::F32},  {4, 24, 3, DType::F32}, {2, 40, 8, DType::BF16},
      {5, 96, 4, DType::BF16}, {1, 7, 7, DType::F32},
  };
  uint64_t seed = 31;
  for (const auto& c : cases)
    run_gated_case(c, seed++);
}

TEST(HostGatedRmsNorm, GroupsMustDivideWidth) {
  std::mt19937_64 rng(3);
  ops::GatedRmsNormArgs a;
  a.y = random_tensor({2, 10}, DType::F32, rng);
  a.z = random_tensor({2, 10}, DType::F32, rng);
  a.weight = random_tensor({10}, DType::F32, rng);
  a.groups = 3;
  a.out = Tensor::empty({2, 10}, DType::F32);
  OpContext ctx;
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
