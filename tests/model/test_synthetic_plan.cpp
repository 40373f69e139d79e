// Synthetic weights: the generator's statistics (mean, std, bound) follow the scale rules, the
// plan is deterministic and seed-dependent, FP8 recipes store e4m3(w / weight_scale) within
// e4m3 rounding of the bf16 recipe's value, and the official FP8 layout of Nemotron-3-Nano
// excludes exactly the modules spec 2.2 lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "checkpoint_test_util.h"
#include "model/nemotron_h/fp8_layout.h"
#include "model/nemotron_h/synthetic_plan.h"
#include "model/nemotron_h/synthetic_rng.h"

namespace strata::model {
namespace {

using test::tiny_hybrid_config;

const SyntheticTensor& find(const std::vector<SyntheticTensor>& plan, const std::string& name) {
  auto it = std::find_if(plan.begin(), plan.end(),
                         [&](const SyntheticTensor& t) { return t.name == name; });
  if (it == plan.end()) throw std::runtime_error("no recipe " + name);
  return *it;
}

TEST(SyntheticPlan, SymmetricValuesHaveTheRequestedStdAndBound) {
  SyntheticTensor t;
  t.kind = SynthKind::Symmetric;
  t.seed = 12345;
  const double want_std = 0.037;
  t.k = synth_symmetric_multiplier(want_std);
  const int64_t n = 1 << 18;
  double sum = 0, sum2 = 0, amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = synthetic_value(t, i);
    sum += v;
    sum2 += v * v;
    amax = std::max(amax, std::abs(v));
  }
  const double mean = sum / n, std = std::sqrt(sum2 / n - mean * mean);
  // Standard error of a std estimate from n samples ~ std / sqrt(2n) = 0.14% here; 1% is 7 sigma.
  EXPECT_NEAR(std / want_std, 1.0, 0.01);
  EXPECT_NEAR(mean / want_std, 0.0, 0.01);  // standard error of the mean: std / 512
  EXPECT_LE(amax, synth_symmetric_bound(t.k));
  EXPECT_GT(amax,
            0.85 * synth_symmetric_bound(t.k));  // tails reached: ~180 of 2^18 draws lie beyond
}

TEST(SyntheticPlan, UniformValuesStayInRange) {
  SyntheticTensor t;
  t.kind = SynthKind::Uniform;
  t.seed = 99;
  t.lo = -6.0f;
  t.span = 3.5f;
  double lo = 1e9, hi = -1e9;
  const int64_t n = 100000;
  for (int64_t i = 0; i < n; ++i) {
    const double v = synthetic_value(t, i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -6.0);
  EXPECT_LT(hi, -2.5);
  EXPECT_LT(lo, -5.99);  // 1e5 draws cover the range to within 1e-4 of each end
  EXPECT_GT(hi, -2.51);
}

TEST(SyntheticPlan, DeterministicAndSeeded) {
  const ModelConfig c = tiny_hybrid_config();
  const auto a = synthetic_plan(c, {.seed = 7, .dtype = DType::BF16});
  const auto b = synthetic_plan(c, {.seed = 7, .dtype = DType::BF16});
  const auto d = synthetic_plan(c, {.seed = 8, .dtype = DType::BF16});
  ASSERT_EQ(a.size(), b.size());
  std::set<uint64_t> seeds;
  int64_t compared = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].seed, b[i].seed);
    EXPECT_NE(a[i].seed, d[i].seed) << a[i].name;
    seeds.insert(a[i].seed);
    const Tensor ta = materialize_synthetic(a[i]), tb = materialize_synthetic(b[i]);
    ASSERT_EQ(ta.nbytes(), tb.nbytes());
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << a[i].name;
    ++compared;
  }
  EXPECT_EQ(seeds.size(), a.size());  // every tensor has its own stream
  EXPECT_EQ(compared, static_cast<int64_t>(a.size()));
}

TEST(SyntheticPlan, Fp8RecipesQuantizeTheBf16Values) {
  const ModelConfig c = tiny_hybrid_config();
  const auto bf = synthetic_plan(c, {.seed = 3, .dtype = DType::BF16});
  const auto q = synthetic_plan(c, {.seed = 3, .dtype = DType::BF16, .fp8 = true});
  int64_t fp8_tensors = 0, elements = 0;
  for (const SyntheticTensor& t : q) {
    if (t.dtype != DType::F8E4M3) continue;
    ++fp8_tensors;
    const std::string module = t.name.substr(0, t.name.size() - 7);  // drop ".weight"
    EXPECT_TRUE(fp8_quantized_module(c, module)) << t.name;
    const float ws = find(q, module + ".weight_scale").value;
    const float is = find(q, module + ".input_scale").value;
    EXPECT_GT(is, 0.f);
    const Tensor stored = materialize_synthetic(t);
    const SyntheticTensor& ref = find(bf, t.name);
    for (int64_t i = 0; i < t.shape.numel(); ++i, ++elements) {
      const double w = synthetic_value(ref, i);  // the unrounded value
      const double deq = fp8e4m3_to_f32(stored.data<uint8_t>()[i]) * static_cast<double>(ws);
      // e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 relative for normals (|q| >= 2^-6);
      // subnormals are spaced 2^-9, so the absolute error is at most 2^-10 * weight_scale.
      const double tol = std::max(std::abs(w) * 0x1p-4, 0x1p-10 * ws) *
                         (1 + 1e-5);  // slack for inv_scale != 1 / weight_scale in f32
      ASSERT_LE(std::abs(deq - w), tol) << t.name << "[" << i << "]";
      ASSERT_LT(std::abs(w / ws), 448.0) << "saturated " << t.name;
    }
  }
  EXPECT_GT(fp8_tensors, 0);
  EXPECT_GT(elements, 1000);
}

TEST(Fp8Layout, NanoThreeExcludesTheOfficialModules) {
  const ModelConfig c = ModelConfig::preset("nemotron-3-nano-30b-a3b");
  // Spec 2.2/2.3: the Mamba layers feeding attention are 4, 11, 18, 25, 32, 41; attention layers
  // 5, 12, 19, 26, 33, 42.
  EXPECT_EQ(attention_feeding_mamba_layers(c), (std::vector<int64_t>{4, 11, 18, 25, 32, 41}));
  const auto ex = fp8_excluded_modules(c);
  const std::set<std::string> exs(ex.begin(), ex.end());
  EXPECT_TRUE(exs.count("lm_head"));
  EXPECT_TRUE(exs.count("backbone.layers.41.mixer.out_proj"));
  EXPECT_TRUE(exs.count("backbone.layers.42.mixer.q_proj"));
  EXPECT_TRUE(exs.count("backbone.layers.50.mixer.conv1d"));
  EXPECT_FALSE(exs.count("backbone.layers.2.mixer.in_proj"));
  // Quantized: 17 Mamba layers x 2, 23 MoE layers x (128 x 2 experts + 2 shared) (spec 2.3's
  // count).
  int64_t quantized = 0;
  for (const std::string& m : linear_modules(c))
    quantized += exs.count(m) ? 0 : 1;
  EXPECT_EQ(quantized, 17 * 2 + 23 * 258);
}

}  // namespace
}  // namespace strata::model
