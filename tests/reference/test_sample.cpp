// Host sampler: greedy argmax, determinism of the seeded draw, top-k = 1 equals greedy, top-p
// extremes, and frequency tests of the drawn tokens against the float64 softmax (chi-square
// over many seeds on a small vocabulary).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "ops/sampling_rng.h"
#include "reference_util.h"

namespace strata::reftest {
namespace {

std::vector<int32_t> sample(const Tensor& logits, const std::vector<ops::SamplingRow>& rows) {
  ops::SampleArgs a;
  a.logits = logits;
  a.rows = rows;
  a.ids = Tensor::empty({logits.dim(0)}, DType::I32);
  poison(a.ids);  // -1 everywhere: an unwritten row is not a valid id
  OpContext ctx;
  ops::run(ctx, a);
  return std::vector<int32_t>(a.ids.data<int32_t>(), a.ids.data<int32_t>() + logits.dim(0));
}

// `n` copies of one logits row.
Tensor repeat_row(const std::vector<float>& row, int64_t n) {
  Tensor t = Tensor::empty({n, static_cast<int64_t>(row.size())}, DType::F32);
  for (int64_t i = 0; i < n; ++i)
    std::copy(row.begin(), row.end(), t.data<float>() + i * static_cast<int64_t>(row.size()));
  return t;
}

TEST(HostSample, GreedyIsArgmaxWithLowestIndexOnTies) {
  std::mt19937_64 rng(500);
  const int64_t B = 6, V = 1000;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 3.0);
  // Row 1: a tie for the maximum at 17 and 900. Row 2: -inf entries (masked tokens).
  float* l = logits.data<float>();
  l[V + 17] = l[V + 900] = 50.f;
  for (int64_t i = 0; i < V; i += 2)
    l[2 * V + i] = -INFINITY;
  std::vector<ops::SamplingRow> rows(static_cast<size_t>(B));
  const std::vector<int32_t> got = sample(logits, rows);
  int64_t checked = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (l[b * V + i] > l[b * V + best]) best = i;
    EXPECT_EQ(got[b], best) << "row " << b;
    ++checked;
  }
  EXPECT_EQ(got[1], 17);
  EXPECT_EQ(got[2] % 2, 1) << "a masked (-inf) token was chosen";
  EXPECT_EQ(checked, B);
}

TEST(HostSample, SeededDrawIsDeterministicAndIndependentOfBatchPosition) {
  std::mt19937_64 rng(501);
  const int64_t V = 50, B = 40;
  Tensor one = random_tensor({1, V}, DType::F32, rng, 2.0);
  std::vector<float> row(one.data<float>(), one.data<float>() + V);
  std::vector<ops::SamplingRow> rows;
  for (int64_t b = 0; b < B; ++b)
    rows.push_back({0.9f, 0, 1.f, static_cast<uint64_t>(1000 + b), static_cast<uint64_t>(b % 5)});
  const std::vector<int32_t> first = sample(repeat_row(row, B), rows);
  EXPECT_EQ(sample(repeat_row(row, B), rows), first);
  // The same rows in reverse order draw the same tokens (the draw depends on seed and step only).
  std::vector<ops::SamplingRow> reversed(rows.rbegin(), rows.rend());
  std::vector<int32_t> again = sample(repeat_row(row, B), reversed);
  std::reverse(again.begin(), again.end());
  EXPECT_EQ(again, first);
  // Distinct (seed, step) give distinct uniforms (24-bit values; collisions are unlikely).
  std::set<float> u;
  for (uint64_t seed = 0; seed < 50; ++seed)
    for (uint64_t step = 0; step < 50; ++step) {
      const float v = ops::philox_or_splitmix(seed, step);
      ASSERT_GE(v, 0.f);
      ASSERT_LT(v, 1.f);
      u.insert(v);
    }
  EXPECT_GT(u.size(), 2490u);
}

TEST(HostSample, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937_64 rng(502);
  const int64_t B = 64, V = 300;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 2.0);
  const std::vector<int32_t> greedy =
      sample(logits, std::vector<ops::SamplingRow>(static_cast<size_t>(B)));
  std::vector<ops::SamplingRow> k1, tiny_p;
  for (int64_t b = 0; b < B; ++b) {
    k1.push_back({0.5f + 0.1f * static_cast<float>(b % 10), 1, 1.f, static_cast<uint64_t>(b), 3});
    tiny_p.push_back({1.5f, 0, 1e-6f, static_cast<uint64_t>(b) * 7, 1});
  }
  EXPECT_EQ(sample(logits, k1), greedy);
  EXPECT_EQ(sample(logits, tiny_p), greedy);
}

// Survival function of the chi-square distribution with k degrees of freedom (closed forms for
// even and odd k), i.e. the p-value of a statistic x.
double chi2_pvalue(double x, int k) {
  if (k % 2 == 0) {
    double term = 1, sum = 1;
    for (int i = 1; i < k / 2; ++i)
      sum += (term *= x / 2 / i);
    return std::exp(-x / 2) * sum;
  }
  double term = std::sqrt(2 * x / M_PI) * std::exp(-x / 2), sum = 0;
  for (int i = 0; i <= (k - 3) / 2; ++i) {
    sum += term;
    term *= x / (2 * i + 3);
  }
  return std::erfc(std::sqrt(x / 2)) + sum;
}

struct FreqCase {
  std::vector<float> logits;
  float temperature;
  int32_t top_k;
  float top_p;
};

// Draws N tokens with seeds 0..N-1 and compares the counts with N * p from a float64
// softmax after the same top-k / top-p cut. A correct sampler gives a chi-square p-value
// above 1e-4 except with probability 1e-4; the seeds are fixed, so the test is deterministic.
void run_frequency_case(const FreqCase& c) {
  SCOPED_TRACE(
      fmt::format("V={} T={} top_k={} top_p={}", c.logits.size(), c.temperature, c.top_k, c.top_p));
  const int64_t V = static_cast<int64_t>(c.logits.size()), N = 20000;
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return c.logits[a] > c.logits[b]; });
  const int64_t k = c.top_k > 0 ? std::min<int64_t>(c.top_k, V) : V;
  std::vector<double> p(static_cast<size_t>(V), 0.0);
  double mass = 0;
  for (int64_t i = 0; i < k; ++i)
    mass += (p[order[i]] = std::exp((c.logits[order[i]] - c.logits[order[0]]) / c.temperature));
  int64_t kept = k;
  double cum = 0;
  for (int64_t i = 0; i < k && c.top_p < 1.f; ++i) {
    cum += p[order[i]] / mass;
    if (cum >= c.top_p) {
      ASSERT_GT(cum - c.top_p, 1e-6) << "top_p too close to a boundary for an unambiguous test";
      kept = i + 1;
      break;
    }
  }
  double kept_mass = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (std::find(order.begin(), order.begin() + kept, i) == order.begin() + kept) p[i] = 0;
    kept_mass += p[i];
  }
  std::vector<ops::SamplingRow> rows;
  for (int64_t s = 0; s < N; ++s)
    rows.push_back({c.temperature, c.top_k, c.top_p, static_cast<uint64_t>(s), 11});
  const std::vector<int32_t> got = sample(repeat_row(c.logits, N), rows);
  std::vector<int64_t> count(static_cast<size_t>(V), 0);
  for (int32_t id : got) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, V);
    ++count[id];
  }
  double chi2 = 0;
  int64_t excluded_hits = 0, total = 0;
  for (int64_t i = 0; i < V; ++i) {
    total += count[i];
    if (p[i] == 0) {
      excluded_hits += count[i];
      continue;
    }
    const double expect = static_cast<double>(N) * p[i] / kept_mass;
    chi2 += (static_cast<double>(count[i]) - expect) * (static_cast<double>(count[i]) - expect) /
            expect;
  }
  EXPECT_EQ(total, N);
  EXPECT_EQ(excluded_hits, 0) << "tokens outside top-k / top-p were drawn";
  if (kept > 1) {
    EXPECT_GT(chi2_pvalue(chi2, static_cast<int>(kept - 1)), 1e-4)
        << "chi2 " << chi2 << " with " << kept - 1 << " dof";
  }
}

TEST(HostSample, FrequenciesMatchTheDistribution) {
  const std::vector<float> l = {1.2f, -0.3f, 0.8f, 2.0f, 0.0f, -1.5f};
  run_frequency_case({l, 0.8f, 0, 1.f});                     // full softmax, 5 dof
  run_frequency_case({l, 1.0f, 3, 1.f});                     // top-k = 3
  run_frequency_case({l, 1.3f, 0, 0.7f});                    // top-p cut
  run_frequency_case({l, 2.0f, 4, 0.9f});                    // both
  run_frequency_case({l, 0.5f, 0, 1.f});                     // sharp
  run_frequency_case({{0.f, 0.f, 0.f, 0.f}, 1.0f, 0, 1.f});  // uniform
}

// top_p = 1 is "off": the same draws as without it, and every token stays reachable.
TEST(HostSample, TopPOneKeepsEveryToken) {
  const std::vector<float> l = {0.1f, 0.3f, -0.2f, 0.0f, 0.25f};
  std::vector<ops::SamplingRow> rows;
  for (uint64_t s = 0; s < 2000; ++s)
    rows.push_back({1.0f, 0, 1.f, s, 0});
  const std::vector<int32_t> ids = sample(repeat_row(l, 2000), rows);
  std::set<int32_t> seen(ids.begin(), ids.end());
  EXPECT_EQ(seen.size(), l.size());
  for (auto& r : rows)
    r.top_k = static_cast<int32_t>(l.size());  // top-k of the whole vocabulary: same cut
  EXPECT_EQ(sample(repeat_row(l, 2000), rows), ids);
}

// The top-p boundary: equal logits give p = 1 per token exactly (exp(0)), so with top_p = 0.5 over
// four tokens the first two reach the needed mass 2.0 exactly: the kept set is {0, 1} (the
// shortest prefix whose mass *reaches* top_p, vLLM's rule), never a third token. 400 draws: a
// third kept token would be drawn ~133 times.
TEST(HostSample, TopPStopsAtTheTokenThatReachesTheMassExactly) {
  const std::vector<float> l = {1.5f, 1.5f, 1.5f, 1.5f};
  std::vector<ops::SamplingRow> rows;
  for (uint64_t s = 0; s < 400; ++s)
    rows.push_back({1.0f, 0, 0.5f, s, 0});
  const std::vector<int32_t> ids = sample(repeat_row(l, 400), rows);
  std::map<int32_t, int> count;
  for (int32_t id : ids)
    ++count[id];
  EXPECT_EQ(count.size(), 2u);
  EXPECT_GT(count[0], 100);
  EXPECT_GT(count[1], 100);
  EXPECT_EQ(count[0] + count[1], 400);
}

TEST(HostSample, InvalidParametersAndLogitsFail) {
  Tensor logits = repeat_row({0.f, 1.f}, 1);
  EXPECT_THROW(sample(logits, {{-1.f, 0, 1.f, 0, 0}}), Error);
  EXPECT_THROW(sample(logits, {{1.f, -2, 1.f, 0, 0}}), Error);
  EXPECT_THROW(sample(logits, {{1.f, 0, 0.f, 0, 0}}), Error);
  EXPECT_THROW(sample(logits, {{1.f, 0, 1.5f, 0, 0}}), Error);
  EXPECT_THROW(sample(logits, {}), Error);  // rows do not match the batch
  EXPECT_THROW(sample(repeat_row({0.f, NAN}, 1), {{}}), Error);
  EXPECT_THROW(sample(repeat_row({-INFINITY, -INFINITY}, 1), {{1.f, 0, 1.f, 0, 0}}), Error);
}

}  // namespace
}  // namespace strata::reftest
