// Host moe_route and moe_experts against float64 code: sigmoid scores, bias used only to
// choose, group-limited choice (n_group > 1), top-k ties to the lower index, renormalized
// unbiased weights times the scaling factor; experts with act rounding after up, relu^2 and
// down, summed in f32 with the routing weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "reference_util.h"

namespace strata::reftest {
namespace {

struct RouteCase {
  int64_t T, E, top_k, n_group, topk_group;
  bool norm;
  float factor;
};

struct RouteRef {
  std::vector<int32_t> ids;       // [T, top_k]
  std::vector<double> w;          // [T, top_k]
  int64_t changed_by_groups = 0;  // tokens whose choice differs from an ungrouped top-k
};

// Sorted descending by value, ties to the lower index (stable sort on indices).
std::vector<int32_t> order_desc(const std::vector<double>& v) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  return idx;
}

RouteRef route_reference(const RouteCase& c, const Tensor& logits, const Tensor& bias) {
  RouteRef r;
  const int64_t gs = c.E / c.n_group;
  for (int64_t t = 0; t < c.T; ++t) {
    std::vector<double> s(static_cast<size_t>(c.E)), sel(static_cast<size_t>(c.E));
    for (int64_t e = 0; e < c.E; ++e) {
      s[e] = 1.0 / (1.0 + std::exp(-get(logits, {t, e})));
      sel[e] = s[e] + get(bias, {e});
    }
    std::vector<double> masked = sel;
    if (c.n_group > 1) {
      std::vector<double> score(static_cast<size_t>(c.n_group));
      for (int64_t g = 0; g < c.n_group; ++g) {
        std::vector<double> members(sel.begin() + g * gs, sel.begin() + (g + 1) * gs);
        std::sort(members.rbegin(), members.rend());
        score[g] = members[0] + members[1];
      }
      const std::vector<int32_t> best = order_desc(score);
      for (int64_t g = c.topk_group; g < c.n_group; ++g)
        for (int64_t i = 0; i < gs; ++i)
          masked[best[g] * gs + i] = -INFINITY;
    }
    const std::vector<int32_t> pick = order_desc(masked), plain = order_desc(sel);
    double sum = 0;
    for (int64_t j = 0; j < c.top_k; ++j)
      sum += s[pick[j]];
    bool differs = false;
    for (int64_t j = 0; j < c.top_k; ++j) {
      r.ids.push_back(pick[j]);
      r.w.push_back((c.norm ? s[pick[j]] / sum : s[pick[j]]) * c.factor);
      differs |= pick[j] != plain[j];
    }
    r.changed_by_groups += differs;
  }
  return r;
}

// Random logits and biases whose selection scores (and group scores) are at least `gap`
// apart within every row, so f32 and f64 choose the same experts; rows are redrawn until so.
void draw_separated(const RouteCase& c, Tensor& logits, Tensor& bias, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0.0, 1.5);
  for (int64_t e = 0; e < c.E; ++e)
    set(bias, {e}, 0.2 * n(rng));
  const double gap = 1e-4;
  for (int64_t t = 0; t < c.T; ++t) {
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 1000);
      std::vector<double> sel;
      for (int64_t e = 0; e < c.E; ++e) {
        set(logits, {t, e}, n(rng));
        sel.push_back(1.0 / (1.0 + std::exp(-get(logits, {t, e}))) + get(bias, {e}));
      }
      std::vector<double> all = sel;
      const int64_t gs = c.E / c.n_group;
      for (int64_t g = 0; g < c.n_group && c.n_group > 1; ++g) {
        std::vector<double> m(sel.begin() + g * gs, sel.begin() + (g + 1) * gs);
        std::sort(m.rbegin(), m.rend());
        all.push_back(1e3 + m[0] + m[1]);  // offset: compared only among group scores
      }
      std::sort(all.begin(), all.end());
      bool ok = true;
      for (size_t i = 1; i < all.size(); ++i)
        ok &= all[i] - all[i - 1] >= gap;
      if (ok) break;
    }
  }
}

void run_route_case(const RouteCase& c, uint64_t seed, bool expect_group_effect) {
  SCOPED_TRACE(fmt::format("T={} E={} k={} groups {}/{} norm={}", c.T, c.E, c.top_k, c.topk_group,
                           c.n_group, c.norm));
  std::mt19937_64 rng(seed);
  WideRows logits = wide_rows(c.T, c.E, 3, 0, DType::F32);
  Tensor bias = Tensor::empty({c.E}, DType::F32);
  draw_separated(c, logits.view, bias, rng);
  ops::MoeRouteArgs a;
  a.logits = logits.view;
  a.correction_bias = bias;
  a.top_k = c.top_k;
  a.n_group = c.n_group;
  a.topk_group = c.topk_group;
  a.norm_topk_prob = c.norm;
  a.routed_scaling_factor = c.factor;
  a.ids = Tensor::empty({c.T, c.top_k}, DType::I32);
  a.weights = Tensor::empty({c.T, c.top_k}, DType::F32);
  poison(a.ids);
  poison(a.weights);
  OpContext ctx;
  ops::run(ctx, a);
  const RouteRef r = route_reference(c, logits.view, bias);
  // Weights: sigmoid (exp, add, divide: 3 roundings), a sum of top_k values, a divide and the
  // factor: (top_k + 6) f32 roundings relative.
  Comparison cmp;
  int64_t id_mismatch = 0;
  for (int64_t i = 0; i < c.T * c.top_k; ++i) {
    id_mismatch += a.ids.data<int32_t>()[i] != r.ids[i];
    cmp.check(a.weights.data<float>()[i], r.w[i],
              static_cast<double>(c.top_k + 6) * std::ldexp(1.0, -24) * std::fabs(r.w[i]),
              fmt::format("weights[{}, {}]", i / c.top_k, i % c.top_k));
  }
  EXPECT_EQ(id_mismatch, 0);
  EXPECT_EQ(cmp.compared, c.T * c.top_k);
  EXPECT_EQ(cmp.failed, 0);
  if (expect_group_effect) {
    EXPECT_GT(r.changed_by_groups, 0) << "the data must make group limiting matter";
  }
}

TEST(HostMoeRoute, MatchesFloat64) {
  run_route_case({20, 8, 2, 1, 1, true, 2.5f}, 400, false);
  run_route_case({30, 16, 4, 4, 2, true, 2.5f}, 401, true);    // group-limited
  run_route_case({25, 12, 4, 3, 1, true, 1.0f}, 402, true);    // all picks from one group
  run_route_case({15, 10, 3, 1, 1, false, 1.5f}, 403, false);  // no renormalization
  run_route_case({1, 2, 1, 1, 1, true, 1.0f}, 404, false);
}

// Exact ties: equal selection scores go to the lower index, for experts and for groups.
TEST(HostMoeRoute, TiesGoToTheLowerIndex) {
  ops::MoeRouteArgs a;
  a.logits = Tensor::zeros({1, 8}, DType::F32);
  a.correction_bias = Tensor::zeros({8}, DType::F32);
  a.top_k = 3;
  a.ids = Tensor::empty({1, 3}, DType::I32);
  a.weights = Tensor::empty({1, 3}, DType::F32);
  OpContext ctx;
  ops::run(ctx, a);
  EXPECT_EQ(std::vector<int32_t>(a.ids.data<int32_t>(), a.ids.data<int32_t>() + 3),
            (std::vector<int32_t>{0, 1, 2}));
  for (int j = 0; j < 3; ++j)
    EXPECT_FLOAT_EQ(a.weights.data<float>()[j], 1.0f / 3.0f);
  a.n_group = 4;  // four groups of two, all scoring equal: groups 0 and 1 are kept
  a.topk_group = 2;
  a.top_k = 4;
  a.ids = Tensor::empty({1, 4}, DType::I32);
  a.weights = Tensor::empty({1, 4}, DType::F32);
  ops::run(ctx, a);
  EXPECT_EQ(std::vector<int32_t>(a.ids.data<int32_t>(), a.ids.data<int32_t>() + 4),
            (std::vector<int32_t>{0, 1, 2, 3}));
}

// The correction bias chooses but does not weigh: a strongly biased expert with a low score
// is picked and weighted by its unbiased sigmoid.
TEST(HostMoeRoute, BiasChoosesButDoesNotWeigh) {
  ops::MoeRouteArgs a;
  a.logits = Tensor::empty({1, 4}, DType::F32);
  const float l[4] = {2.f, 1.f, -3.f, 0.5f};
  std::memcpy(a.logits.raw(), l, sizeof(l));
  a.correction_bias = Tensor::zeros({4}, DType::F32);
  a.correction_bias.data<float>()[2] = 10.f;
  a.top_k = 2;
  a.routed_scaling_factor = 2.f;
  a.ids = Tensor::empty({1, 2}, DType::I32);
  a.weights = Tensor::empty({1, 2}, DType::F32);
  OpContext ctx;
  ops::run(ctx, a);
  EXPECT_EQ(a.ids.data<int32_t>()[0], 2);
  EXPECT_EQ(a.ids.data<int32_t>()[1], 0);
  const double s2 = 1 / (1 + std::exp(3.0)), s0 = 1 / (1 + std::exp(-2.0));
  EXPECT_NEAR(a.weights.data<float>()[0], 2 * s2 / (s2 + s0), 1e-6);
  EXPECT_NEAR(a.weights.data<float>()[1], 2 * s0 / (s2 + s0), 1e-6);
}

TEST(HostMoeRoute, InvalidGroupingIsRejected) {
  ops::MoeRouteArgs a;
  a.logits = Tensor::zeros({2, 6}, DType::F32);
  a.ids = Tensor::empty({2, 2}, DType::I32);
  a.weights = Tensor::empty({2, 2}, DType::F32);
  a.top_k = 2;
  OpContext ctx;
  a.n_group = 4;  // does not divide 6
  EXPECT_THROW(ops::run(ctx, a), Error);
  a.n_group = 6;  // groups of one expert have no top-2
  a.topk_group = 2;
  EXPECT_THROW(ops::run(ctx, a), Error);
  a.n_group = 3;
  a.topk_group = 1;
  a.top_k = 3;  // more than the two experts of the one kept group
  a.ids = Tensor::empty({2, 3}, DType::I32);
  a.weights = Tensor::empty({2, 3}, DType::F32);
  EXPECT_THROW(ops::run(ctx, a), Error);
}

struct ExpertsCase {
  int64_t T, H, I, E, K;
  DType act;
  std::vector<DType> forms;  // weight dtype per expert (cycled)
};

// Band by first-order propagation of every rounding, computed alongside the f64 value:
//  u_i = up_i . x:   du_i <= f32_band(sum|up x|, H + 2) + u_act |u_i|          (stored act)
//  r_i = relu(u_i)^2: dr_i <= 2 max(u_i, 0) du_i + du_i^2 + (u_act + 2^-24) r_i  (stored act)
//  d_h = down_h . r: dd_h <= sum|down_hi| dr_i + f32_band(sum|down r|, I + 2) + u_act |d_h|
//  out = sum_j w_j d_j: dout <= sum_j |w_j| dd_j + f32_band(sum|w d|, K + 2) + u_act |out|
void run_experts_case(const ExpertsCase& c, uint64_t seed) {
  SCOPED_TRACE(
      fmt::format("T={} H={} I={} E={} K={} act={}", c.T, c.H, c.I, c.E, c.K, dtype_name(c.act)));
  std::mt19937_64 rng(seed);
  std::vector<ops::LinearWeight> up(static_cast<size_t>(c.E)), down(static_cast<size_t>(c.E));
  std::uniform_real_distribution<double> scale(0.01, 0.05);
  for (int64_t e = 0; e < c.E; ++e) {
    const DType form = c.forms[static_cast<size_t>(e) % c.forms.size()];
    const bool fp8 = form == DType::F8E4M3;
    up[e].weight = random_tensor({c.I, c.H}, form, rng, fp8 ? 8.0 : 0.3);
    down[e].weight = random_tensor({c.H, c.I}, form, rng, fp8 ? 8.0 : 0.3);
    if (fp8) {
      up[e].weight_scale = static_cast<float>(scale(rng));
      down[e].weight_scale = static_cast<float>(scale(rng));
    }
  }
  Tensor x = random_tensor({c.T, c.H}, c.act, rng);
  std::vector<int32_t> ids;
  Tensor weights = Tensor::empty({c.T, c.K}, DType::F32);
  std::uniform_real_distribution<double> wdist(0.1, 1.5);
  for (int64_t t = 0; t < c.T; ++t) {
    std::vector<int32_t> perm(static_cast<size_t>(c.E));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t j = 0; j < c.K; ++j) {
      ids.push_back(perm[j]);
      set(weights, {t, j}, wdist(rng));
    }
  }
  Tensor ids_t = i32_tensor(ids).reshape({c.T, c.K});
  WideRows out = wide_rows(c.T, c.H, 2, 1, c.act);
  ops::MoeExpertsArgs a;
  a.x = x;
  a.up = &up;
  a.down = &down;
  a.ids = ids_t;
  a.weights = weights;
  a.out = out.view;
  OpContext ctx;
  ops::run(ctx, a);

  const double ua = unit_roundoff(c.act), u32 = std::ldexp(1.0, -24);
  auto wv = [](const ops::LinearWeight& w, int64_t r, int64_t k) {
    return get(w.weight, {r, k}) * (w.weight.dtype() == DType::F8E4M3 ? w.weight_scale : 1.0);
  };
  Comparison cmp;
  for (int64_t t = 0; t < c.T; ++t) {
    std::vector<double> o(static_cast<size_t>(c.H), 0.0), o_err(static_cast<size_t>(c.H), 0.0),
        o_mag(static_cast<size_t>(c.H), 0.0);
    for (int64_t j = 0; j < c.K; ++j) {
      const size_t e = static_cast<size_t>(ids[t * c.K + j]);
      const double w = get(weights, {t, j});
      std::vector<double> r(static_cast<size_t>(c.I)), dr(static_cast<size_t>(c.I));
      for (int64_t i = 0; i < c.I; ++i) {
        double u = 0, mag = 0;
        for (int64_t h = 0; h < c.H; ++h) {
          const double p = wv(up[e], i, h) * get(x, {t, h});
          u += p;
          mag += std::fabs(p);
        }
        const double du = f32_band(mag, c.H + 2) + ua * std::fabs(u);
        r[i] = u > 0 ? u * u : 0.0;
        dr[i] = 2 * std::max(u, 0.0) * du + du * du + (ua + u32) * r[i];
      }
      for (int64_t h = 0; h < c.H; ++h) {
        double d = 0, mag = 0, prop = 0;
        for (int64_t i = 0; i < c.I; ++i) {
          const double dw = wv(down[e], h, i);
          d += dw * r[i];
          mag += std::fabs(dw * r[i]);
          prop += std::fabs(dw) * dr[i];
        }
        const double dd = prop + f32_band(mag, c.I + 2) + ua * std::fabs(d);
        o[h] += w * d;
        o_err[h] += std::fabs(w) * dd;
        o_mag[h] += std::fabs(w * d);
      }
    }
    for (int64_t h = 0; h < c.H; ++h) {
      const double tol = o_err[h] + f32_band(o_mag[h], c.K + 2) + ua * std::fabs(o[h]);
      cmp.check(get(out.view, {t, h}), o[h], tol, fmt::format("out[{}, {}]", t, h));
    }
  }
  EXPECT_EQ(cmp.compared, c.T * c.H);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(out.touched_guards(), 0);
}

TEST(HostMoeExperts, MatchesFloat64) {
  run_experts_case({9, 12, 20, 5, 2, DType::F32, {DType::F32}}, 410);
  run_experts_case({7, 16, 24, 6, 3, DType::BF16, {DType::BF16}}, 411);
  run_experts_case({5, 10, 14, 4, 2, DType::BF16, {DType::F8E4M3, DType::BF16}},
                   412);                                                // FP8 checkpoints, W8A16
  run_experts_case({1, 33, 7, 8, 6, DType::BF16, {DType::BF16}}, 413);  // one decode token
  run_experts_case({300, 8, 6, 3, 1, DType::F32, {DType::F32}}, 414);   // more than one token block
}

TEST(HostMoeExperts, BadIdsAndShapesAreRejected) {
  std::mt19937_64 rng(420);
  std::vector<ops::LinearWeight> up(2), down(2);
  for (int e = 0; e < 2; ++e) {
    up[e].weight = random_tensor({6, 4}, DType::F32, rng);
    down[e].weight = random_tensor({4, 6}, DType::F32, rng);
  }
  ops::MoeExpertsArgs a;
  a.x = random_tensor({1, 4}, DType::F32, rng);
  a.up = &up;
  a.down = &down;
  a.ids = i32_tensor({2}).reshape({1, 1});
  a.weights = Tensor::zeros({1, 1}, DType::F32);
  a.out = Tensor::empty({1, 4}, DType::F32);
  OpContext ctx;
  EXPECT_THROW(ops::run(ctx, a), Error);  // expert 2 of 2
  a.ids = i32_tensor({1}).reshape({1, 1});
  down[1].weight = random_tensor({4, 5}, DType::F32, rng);  // I mismatch
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
