// Host sampler: penalties (vLLM's apply_penalties) and logit bias, checked through the processed
// logprobs the op reports, and logprobs (values, top-k ids, sampled rank) against the float64
// reference of sample_reference.h.
#include <gtest/gtest.h>

#include "sample_reference.h"

namespace strata::reftest {
namespace {

using ops::SamplingRow;

// f32 band of a processed logprob: the op rounds z (bias, repetition, frequency, presence:
// <= 5 roundings of values <= zmax), z / T (one more), and lp = z / T - lse (one, plus lse's
// own rounding from f32 inputs); 16 unit roundoffs of (zmax / T + |lp|) bounds them all.
double lp_band(double zmax, double T, double lp) {
  return std::ldexp(16.0 * (zmax / T + std::fabs(lp)), -24);
}

double T_of(const SamplingRow& r) {
  return r.temperature < ops::kGreedyTemperature ? 1.0 : r.temperature;
}

// Checks one row's logprob outputs against the reference; returns the values compared.
int64_t check_logprobs(const SampleOut& got, int64_t b, const std::vector<double>& z,
                       const SamplingRow& r, double zmax) {
  const std::vector<double> lp = ref_logprobs(z, r);
  const int64_t V = static_cast<int64_t>(z.size());
  int64_t compared = 0;
  const int32_t id = got.ids[b];
  EXPECT_GE(id, 0);
  if (id < 0) return 0;
  EXPECT_NEAR(got.sampled_lp[b], lp[id], lp_band(zmax, T_of(r), lp[id])) << "row " << b;
  int32_t rank = 0;
  for (double x : lp)
    rank += x >= lp[id] ? 1 : 0;
  EXPECT_EQ(got.rank[b], rank) << "row " << b;
  compared += 2;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return lp[a] > lp[c]; });
  const int64_t n = std::min<int64_t>(r.num_logprobs, V);
  for (int64_t i = 0; i < got.K; ++i) {
    const int32_t gid = got.top_ids[b * got.K + i];
    const float glp = got.top_lp[b * got.K + i];
    if (i >= n) {  // slots the row does not fill
      EXPECT_EQ(gid, -1);
      EXPECT_EQ(glp, 0.f);
      continue;
    }
    EXPECT_EQ(gid, order[i]) << "row " << b << " top " << i;
    const double want = lp[order[i]];
    if (std::isinf(want)) {
      EXPECT_EQ(glp, want);
    } else {
      EXPECT_NEAR(glp, want, lp_band(zmax, T_of(r), want)) << "row " << b << " top " << i;
    }
    compared += 2;
  }
  return compared;
}

double max_abs(const std::vector<float>& raw, const std::vector<double>& z) {
  double m = 1;
  for (float x : raw)
    m = std::max(m, static_cast<double>(std::fabs(x)));
  for (double x : z)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

// Hand-computed penalties (every value exact in f32), read back through the full logprobs.
TEST(HostSamplePenalties, HandComputedCases) {
  const std::vector<float> raw = {2.0f, -1.0f, 0.5f, 3.0f, -0.5f, 1.0f};
  // token 0: twice in the output; 1: in the prompt; 3: in both, bias 0.5; 4: bias -1 only;
  // 5: three times in the output.
  const std::vector<RefEntry> entries = {{0, 2, false, 0.f},
                                         {1, 0, true, 0.f},
                                         {3, 1, true, 0.5f},
                                         {4, 0, false, -1.f},
                                         {5, 3, false, 0.f}};
  struct Case {
    float rep, freq, pres, T;
    std::vector<double> z;  // by hand: bias, then z > 0 ? z / rep : z * rep, then - f*c - p
    int32_t greedy;
  };
  const Case cases[] = {
      {2.f, 0.5f, 0.25f, 0.f, {-0.25, -2.0, 0.5, 1.0, -1.5, -1.25}, 3},
      {4.f, 0.5f, 0.25f, 0.f, {-0.75, -4.0, 0.5, 0.125, -1.5, -1.5}, 2},
      {1.f, 0.f, 0.f, 0.f, {2.0, -1.0, 0.5, 3.5, -1.5, 1.0}, 3},      // bias only
      {0.5f, -1.f, 1.f, 0.5f, {5.0, -0.5, 0.5, 7.0, -1.5, 4.0}, -1},  // rep < 1, negative freq
  };
  int64_t compared = 0;
  for (const Case& c : cases) {
    SamplingRow r;
    r.repetition_penalty = c.rep;
    r.frequency_penalty = c.freq;
    r.presence_penalty = c.pres;
    r.temperature = c.T;
    r.num_logprobs = 6;
    r.seed = 5;
    // The reference agrees with the hand values...
    const std::vector<double> z = ref_processed(raw, r, entries);
    for (size_t v = 0; v < z.size(); ++v)
      ASSERT_DOUBLE_EQ(z[v], c.z[v]) << "rep " << c.rep << " token " << v;
    // ...and the op reports them.
    const SampleOut got = run_sample(repeat_row(raw, 1), {r}, {entries}, 6);
    if (c.greedy >= 0) {
      EXPECT_EQ(got.ids[0], c.greedy);
    }
    compared += check_logprobs(got, 0, c.z, r, 8.0);
  }
  EXPECT_EQ(compared, 4 * 14);
}

// Random penalties and biases (including bans) on random logits: every processed logprob of
// every row (V = 20 = the most logprobs a row may ask for).
TEST(HostSamplePenalties, RandomRowsMatchTheReference) {
  std::mt19937_64 rng(520);
  const int64_t B = 96, V = 20;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 2.0);
  std::uniform_real_distribution<double> u01(0, 1);
  std::vector<SamplingRow> rows(B);
  std::vector<std::vector<RefEntry>> entries(B);
  const float temps[] = {0.f, 0.7f, 1.3f};
  for (int64_t b = 0; b < B; ++b) {
    SamplingRow& r = rows[b];
    r.temperature = temps[b % 3];
    r.top_k = b % 4 == 1 ? 5 : 0;
    r.top_p = b % 5 == 2 ? 0.8f : 1.f;
    r.repetition_penalty = static_cast<float>(0.5 + 2 * u01(rng));
    r.frequency_penalty = static_cast<float>(4 * u01(rng) - 2);
    r.presence_penalty = static_cast<float>(4 * u01(rng) - 2);
    r.num_logprobs = 20;
    r.seed = rng();
    for (int32_t v = 0; v < V; ++v) {
      if (u01(rng) > 0.4) continue;
      RefEntry e{v, static_cast<int32_t>(rng() % 4), u01(rng) < 0.5, 0.f};
      const double kind = u01(rng);
      if (kind < 0.4) e.bias = static_cast<float>(6 * u01(rng) - 3);
      if (kind > 0.92 && v != 0) e.bias = -INFINITY;  // token 0 never banned: rows stay valid
      entries[b].push_back(e);
    }
  }
  const SampleOut got = run_sample(logits, rows, entries, 20);
  int64_t compared = 0, greedy_checked = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> raw = row_of(logits, b);
    const std::vector<double> z = ref_processed(raw, rows[b], entries[b]);
    ASSERT_EQ(got.nonfinite[b], 0);
    compared += check_logprobs(got, b, z, rows[b], max_abs(raw, z));
    if (rows[b].temperature == 0.f) {
      const std::vector<int32_t> order = ref_order(z);
      EXPECT_EQ(got.ids[b], order[0]) << "row " << b;
      ++greedy_checked;
    } else {  // drawn from the kept set of the processed logits
      const RefKept kept = ref_kept(z, rows[b]);
      EXPECT_TRUE(std::binary_search(kept.tokens.begin(), kept.tokens.end(), got.ids[b]))
          << "row " << b;
    }
  }
  EXPECT_EQ(greedy_checked, B / 3);
  EXPECT_EQ(compared, B * (2 + 2 * V));
}

TEST(HostSamplePenalties, BannedTokensAreNeverDrawn) {
  const std::vector<float> raw = {0.5f, 1.0f, -0.2f, 3.0f, 0.1f, 0.9f, 0.3f, -1.0f};
  const int64_t N = 4000;
  std::vector<SamplingRow> rows(N);
  for (int64_t s = 0; s < N; ++s) {
    rows[s].temperature = s == 0 ? 0.f : 1.5f;
    rows[s].seed = static_cast<uint64_t>(s);
  }
  // Token 3 (the raw maximum) banned; token 7 raised by 2.
  const std::vector<RefEntry> e = {{3, 0, false, -INFINITY}, {7, 0, false, 2.f}};
  const SampleOut got = run_sample(repeat_row(raw, N), rows, std::vector(N, e));
  std::vector<int64_t> count(raw.size(), 0);
  for (int32_t id : got.ids)
    ++count[id];
  EXPECT_EQ(count[3], 0);
  EXPECT_EQ(got.ids[0], 1);  // greedy: the best remaining token
  for (size_t v = 0; v < raw.size(); ++v)
    if (v != 3) {
      EXPECT_GT(count[v], 40) << "token " << v;
    }
}

// Logprobs on a larger vocabulary, every path and several k, before the masks: a top_k = 1 row
// reports the full distribution's logprob for its token, not 0.
TEST(HostSampleLogprobs, ValuesRanksAndTopTokensMatchTheReference) {
  std::mt19937_64 rng(530);
  const int64_t B = 30, V = 3000, K = 20;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 2.0);
  std::vector<SamplingRow> rows(B);
  const int32_t ns[] = {-1, 0, 1, 5, 20};
  for (int64_t b = 0; b < B; ++b) {
    SamplingRow& r = rows[b];
    r.temperature = b % 6 == 0 ? 0.f : 0.5f + 0.2f * static_cast<float>(b % 5);
    r.top_k = b % 6 == 1 ? 1 : (b % 6 == 2 ? 50 : 0);
    r.top_p = b % 6 == 3 ? 0.9f : 1.f;
    r.min_p = b % 6 == 4 ? 0.1f : 0.f;
    r.num_logprobs = ns[b % 5];
    r.seed = rng();
    r.step = 4;
  }
  const SampleOut got = run_sample(logits, rows, {}, K);
  int64_t compared = 0, without = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (rows[b].num_logprobs < 0) {
      EXPECT_EQ(got.sampled_lp[b], 0.f);
      EXPECT_EQ(got.rank[b], 0);
      for (int64_t i = 0; i < K; ++i)
        EXPECT_EQ(got.top_ids[b * K + i], -1);
      ++without;
      continue;
    }
    const std::vector<float> raw = row_of(logits, b);
    const std::vector<double> z = ref_processed(raw, rows[b], {});
    compared += check_logprobs(got, b, z, rows[b], max_abs(raw, z));
    if (rows[b].top_k == 1) {
      EXPECT_LT(got.sampled_lp[b], -1e-3) << "masked before logprobs";
    }
  }
  EXPECT_EQ(without, B / 5);
  EXPECT_GT(compared, 2 * (B - without) + 100);
}

}  // namespace
}  // namespace strata::reftest
