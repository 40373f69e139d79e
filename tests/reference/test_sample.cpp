// Host sampler against the float64 reference of sample_reference.h: greedy argmax, the kept
// sets of min_p / top_k / top_p (exactly the reference's), draw frequencies (chi-square over
// many seeds, deterministic), reproducibility independent of the batch, the non-finite flag,
// and argument validation. Penalties, logit bias and logprobs: test_sample_logprobs.cpp.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ops/host/sample_host.h"
#include "sample_reference.h"

namespace strata::reftest {
namespace {

using ops::SamplingRow;

SamplingRow random_row(float T, int32_t k, float p, float min_p, uint64_t seed, uint64_t step) {
  SamplingRow r;
  r.temperature = T;
  r.top_k = k;
  r.top_p = p;
  r.min_p = min_p;
  r.seed = seed;
  r.step = step;
  return r;
}

TEST(HostSample, GreedyIsArgmaxWithLowestIndexOnTies) {
  std::mt19937_64 rng(500);
  const int64_t B = 6, V = 1000;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 3.0);
  // Row 1: a tie for the maximum at 17 and 900. Row 2: very negative entries.
  float* l = logits.data<float>();
  l[V + 17] = l[V + 900] = 50.f;
  for (int64_t i = 0; i < V; i += 2)
    l[2 * V + i] = -1e30f;
  const SampleOut got = run_sample(logits, std::vector<SamplingRow>(B));
  int64_t checked = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t> order = ref_order(ref_processed(row_of(logits, b), {}, {}));
    EXPECT_EQ(got.ids[b], order[0]) << "row " << b;
    EXPECT_EQ(got.nonfinite[b], 0);
    ++checked;
  }
  EXPECT_EQ(got.ids[1], 17);
  EXPECT_EQ(got.ids[2] % 2, 1) << "a -1e30 token was chosen";
  EXPECT_EQ(checked, B);
}

// The set a row draws from equals the reference's kept set exactly, on random logits and
// random filter settings. The op thresholds s = (z - max) / T rounded to f32 (two roundings:
// |error| <= 2^-23 |s|, and |s| < 8 for every token that matters here), so p = exp(s) and the
// masses it sums are off by < 1e-6 relative; rows whose decision lies within 4e-6 of a
// threshold, where f32 and f64 may rightly disagree, are counted and must be rare.
TEST(HostSample, KeptSetsEqualTheFloat64Reference) {
  std::mt19937_64 rng(510);
  const int64_t V = 2000;
  const float temps[] = {0.3f, 0.7f, 1.f, 1.6f};
  const int32_t ks[] = {0, 0, 1, 7, 60, 1999, 5000};
  const float ps[] = {1.f, 1.f, 0.3f, 0.8f, 0.95f, 0.999f};
  const float min_ps[] = {0.f, 0.f, 0.001f, 0.05f, 0.3f};
  const double spreads[] = {0.5, 2.0, 6.0};
  int64_t compared = 0, ambiguous = 0, tokens = 0;
  std::vector<int32_t> order;
  for (int trial = 0; trial < 400; ++trial) {
    Tensor t = random_tensor({1, V}, DType::F32, rng, spreads[trial % 3]);
    const std::vector<float> raw = row_of(t, 0);
    const SamplingRow r =
        random_row(temps[rng() % 4], ks[rng() % 7], ps[rng() % 6], min_ps[rng() % 5], rng(), 0);
    const RefKept want = ref_kept(ref_processed(raw, r, {}), r);
    if (want.margin < 4e-6) {
      ++ambiguous;
      continue;
    }
    const float m = *std::max_element(raw.begin(), raw.end());
    const int64_t kept = ops::host::sample_kept_tokens(raw, m, r, order);
    std::vector<int32_t> got(order.begin(), order.begin() + kept);
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, want.tokens) << "trial " << trial << " T " << r.temperature << " top_k "
                                << r.top_k << " top_p " << r.top_p << " min_p " << r.min_p;
    ++compared;
    tokens += kept;
  }
  EXPECT_EQ(compared + ambiguous, 400);
  EXPECT_LE(ambiguous, 8);
  EXPECT_GT(tokens, 400);  // not only single-token sets
}

struct FreqCase {
  std::vector<float> logits;
  SamplingRow row;
  std::vector<RefEntry> entries;
};

// Draws N tokens with seeds 0..N-1 (step 11) and compares the counts with N * p of the float64
// reference distribution (processed logits, masks, softmax at T). A correct sampler gives a
// chi-square p-value above 1e-4 except with probability 1e-4; the seeds are fixed, so the test
// is deterministic, and a wrong distribution (a mask off by one, a temperature applied twice,
// a penalty with the wrong sign) fails it.
void run_frequency_case(const FreqCase& c) {
  const SamplingRow& r0 = c.row;
  SCOPED_TRACE(fmt::format("V={} T={} top_k={} top_p={} min_p={} entries={}", c.logits.size(),
                           r0.temperature, r0.top_k, r0.top_p, r0.min_p, c.entries.size()));
  const int64_t V = static_cast<int64_t>(c.logits.size()), N = 20000;
  const std::vector<double> z = ref_processed(c.logits, r0, c.entries);
  ASSERT_GT(ref_kept(z, r0).margin, 1e-4) << "a threshold too close to a token for f32";
  const std::vector<double> p = ref_distribution(z, r0);
  std::vector<SamplingRow> rows(static_cast<size_t>(N), r0);
  for (int64_t s = 0; s < N; ++s) {
    rows[s].seed = static_cast<uint64_t>(s);
    rows[s].step = 11;
  }
  const SampleOut got =
      run_sample(repeat_row(c.logits, N), rows,
                 c.entries.empty() ? std::vector<std::vector<RefEntry>>{}
                                   : std::vector<std::vector<RefEntry>>(N, c.entries));
  std::vector<int64_t> count(static_cast<size_t>(V), 0);
  for (int32_t id : got.ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, V);
    ++count[id];
  }
  double chi2 = 0;
  int64_t excluded_hits = 0, total = 0, kept = 0;
  for (int64_t i = 0; i < V; ++i) {
    total += count[i];
    if (p[i] == 0) {
      excluded_hits += count[i];
      continue;
    }
    ++kept;
    const double expect = static_cast<double>(N) * p[i];
    ASSERT_GT(expect, 5) << "token " << i << ": too rare for a chi-square cell";
    chi2 += (static_cast<double>(count[i]) - expect) * (static_cast<double>(count[i]) - expect) /
            expect;
  }
  EXPECT_EQ(total, N);
  EXPECT_EQ(excluded_hits, 0) << "tokens outside the kept set were drawn";
  if (kept > 1) {
    EXPECT_GT(chi2_pvalue(chi2, static_cast<int>(kept - 1)), 1e-4)
        << "chi2 " << chi2 << " with " << kept - 1 << " dof";
  }
}

TEST(HostSample, FrequenciesMatchTheProcessedDistribution) {
  const std::vector<float> l = {1.2f, -0.3f, 0.8f, 2.0f, 0.0f, -1.5f, 0.4f, 1.7f};
  int cases = 0;
  auto run = [&](FreqCase c) {
    run_frequency_case(c);
    ++cases;
  };
  run({l, random_row(0.8f, 0, 1.f, 0.f, 0, 0), {}});     // full softmax: the race path
  run({l, random_row(1.3f, 0, 1.f, 0.f, 0, 0), {}});     // flatter
  run({l, random_row(1.0f, 0, 1.f, 0.2f, 0, 0), {}});    // min_p on the race path
  run({l, random_row(1.0f, 3, 1.f, 0.f, 0, 0), {}});     // top-k = 3
  run({l, random_row(1.3f, 0, 0.7f, 0.f, 0, 0), {}});    // top-p cut
  run({l, random_row(2.0f, 5, 0.9f, 0.05f, 0, 0), {}});  // all three
  run({{0.f, 0.f, 0.f, 0.f}, random_row(1.f, 0, 1.f, 0.f, 0, 0), {}});  // uniform
  // Penalties and bias move the distribution: drawn from the processed logits, not the raw.
  SamplingRow pen = random_row(0.9f, 0, 1.f, 0.f, 0, 0);
  pen.repetition_penalty = 1.5f;
  pen.frequency_penalty = 0.3f;
  pen.presence_penalty = 0.2f;
  run({l, pen, {{3, 2, false, 0.f}, {0, 0, true, 0.f}, {5, 1, true, 1.f}, {7, 0, false, -2.f}}});
  EXPECT_EQ(cases, 8);
}

TEST(HostSample, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937_64 rng(502);
  const int64_t B = 64, V = 300;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 2.0);
  const SampleOut greedy = run_sample(logits, std::vector<SamplingRow>(B));
  std::vector<SamplingRow> k1, tiny_p, min_p1;
  for (int64_t b = 0; b < B; ++b) {
    k1.push_back(random_row(0.5f + 0.1f * static_cast<float>(b % 10), 1, 1.f, 0.f, b, 3));
    tiny_p.push_back(random_row(1.5f, 0, 1e-6f, 0.f, b * 7, 1));
    min_p1.push_back(random_row(0.8f, 0, 1.f, 1.f, b * 3, 2));  // only the maximum passes
  }
  EXPECT_EQ(run_sample(logits, k1).ids, greedy.ids);
  EXPECT_EQ(run_sample(logits, tiny_p).ids, greedy.ids);
  EXPECT_EQ(run_sample(logits, min_p1).ids, greedy.ids);
}

// A row's token depends on its logits, parameters, entries, seed and step only: the same rows
// in another order, with other rows around them, draw the same tokens.
TEST(HostSample, SeededDrawsDoNotDependOnTheBatch) {
  std::mt19937_64 rng(503);
  const int64_t B = 48, V = 700;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 2.0);
  std::vector<SamplingRow> rows;
  std::vector<std::vector<RefEntry>> entries(B);
  for (int64_t b = 0; b < B; ++b) {
    SamplingRow r = random_row(b % 4 == 0 ? 0.f : 0.9f, b % 3 == 0 ? 40 : 0,
                               b % 5 == 0 ? 0.9f : 1.f, b % 7 == 0 ? 0.05f : 0.f, 1000 + b, b % 5);
    if (b % 2 == 0) {
      r.repetition_penalty = 1.3f;
      r.frequency_penalty = 0.5f;
      entries[b] = {{static_cast<int32_t>(b), 2, true, 0.f}, {500, 0, false, 1.5f}};
    }
    rows.push_back(r);
  }
  const SampleOut first = run_sample(logits, rows, entries);
  EXPECT_EQ(run_sample(logits, rows, entries).ids, first.ids);
  // Reversed, with a filler row (other logits, other parameters) between every two rows.
  const int64_t B2 = 2 * B;
  Tensor mixed = random_tensor({B2, V}, DType::F32, rng, 2.0);
  std::vector<SamplingRow> rows2(B2);
  std::vector<std::vector<RefEntry>> entries2(B2);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t at = 2 * (B - 1 - b) + 1;
    std::copy_n(logits.data<float>() + b * V, V, mixed.data<float>() + at * V);
    rows2[at] = rows[b];
    entries2[at] = entries[b];
    rows2[at - 1] = random_row(1.1f, 5, 0.8f, 0.f, rng(), 0);
    entries2[at - 1] = {{3, 1, false, 0.f}};
  }
  const SampleOut again = run_sample(mixed, rows2, entries2);
  int64_t same = 0;
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(again.ids[2 * (B - 1 - b) + 1], first.ids[b]) << "row " << b;
    ++same;
  }
  EXPECT_EQ(same, B);
  // Another step draws differently (most rows are random).
  for (auto& r : rows)
    r.step += 1;
  const SampleOut next = run_sample(logits, rows, entries);
  int64_t changed = 0;
  for (int64_t b = 0; b < B; ++b)
    changed += next.ids[b] != first.ids[b] ? 1 : 0;
  EXPECT_GT(changed, B / 4);
}

TEST(HostSample, GumbelNoiseIsFiniteAndDistinct) {
  std::set<double> seen;
  double lo = INFINITY, hi = -INFINITY;
  for (uint64_t seed = 0; seed < 40; ++seed)
    for (int64_t v = 0; v < 100; ++v) {
      const double g = ops::gumbel_noise(ops::sampling_bits(seed, 7), v);
      ASSERT_TRUE(std::isfinite(g));
      lo = std::min(lo, g);
      hi = std::max(hi, g);
      seen.insert(g);
    }
  EXPECT_EQ(seen.size(), 4000u);
  // The device skips the logs of tokens more than kGumbelSkipGap below a race value already
  // seen when u <= kGumbelSkipUniform: exact only if that u's noise stays below the gap.
  EXPECT_LT(-std::log(-std::log(ops::kGumbelSkipUniform)), ops::kGumbelSkipGap - 0.05);
  EXPECT_GT(lo, -3.7);  // -log(-log(2^-53))
  EXPECT_LT(hi, 36.8);  // -log(2^-53)
}

TEST(HostSample, NonFiniteRowsAreFlagged) {
  std::mt19937_64 rng(504);
  const int64_t B = 6, V = 50;
  Tensor logits = random_tensor({B, V}, DType::F32, rng, 1.0);
  float* l = logits.data<float>();
  l[1 * V + 7] = NAN;
  l[2 * V + 49] = INFINITY;
  l[3 * V + 0] = -INFINITY;
  std::vector<SamplingRow> rows(B, random_row(0.8f, 0, 1.f, 0.f, 9, 1));
  rows[0].temperature = 0.f;
  for (auto& r : rows)
    r.num_logprobs = 3;
  // Row 4: every token banned by bias -inf.
  std::vector<std::vector<RefEntry>> entries(B);
  for (int32_t v = 0; v < V; ++v)
    entries[4].push_back({v, 0, false, -INFINITY});
  const SampleOut got = run_sample(logits, rows, entries, 3);
  const std::vector<int32_t> flags = {0, 1, 1, 1, 2, 0};
  EXPECT_EQ(got.nonfinite, flags);
  for (int64_t b = 0; b < B; ++b) {
    if (flags[b] == 0) {
      EXPECT_GE(got.ids[b], 0);
      EXPECT_GE(got.rank[b], 1);
      continue;
    }
    EXPECT_EQ(got.ids[b], -1) << "row " << b;
    EXPECT_EQ(got.sampled_lp[b], 0.f);
    EXPECT_EQ(got.rank[b], 0);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(got.top_ids[b * 3 + i], -1);
  }
  // The good rows draw what they draw alone.
  SamplingRow no_lp = rows[5];
  no_lp.num_logprobs = -1;  // logprobs do not change the draw
  const SampleOut alone = run_sample(repeat_row(row_of(logits, 5), 1), {no_lp});
  EXPECT_EQ(alone.ids[0], got.ids[5]);
  // Without the flag tensor a flagged row is an error.
  EXPECT_THROW(run_sample(logits, rows, {}, 3, /*flag=*/false), Error);
}

TEST(HostSample, InvalidArgumentsFail) {
  Tensor logits = repeat_row({0.f, 1.f}, 1);
  auto bad = [&](SamplingRow r) { return run_sample(logits, {r}); };
  EXPECT_THROW(bad(random_row(-1.f, 0, 1.f, 0.f, 0, 0)), Error);
  EXPECT_THROW(bad(random_row(1.f, -2, 1.f, 0.f, 0, 0)), Error);
  EXPECT_THROW(bad(random_row(1.f, 0, 0.f, 0.f, 0, 0)), Error);
  EXPECT_THROW(bad(random_row(1.f, 0, 1.5f, 0.f, 0, 0)), Error);
  EXPECT_THROW(bad(random_row(1.f, 0, 1.f, 1.5f, 0, 0)), Error);
  EXPECT_THROW(bad(random_row(NAN, 0, 1.f, 0.f, 0, 0)), Error);
  SamplingRow r;
  r.repetition_penalty = 0.f;
  EXPECT_THROW(bad(r), Error);
  r = SamplingRow{};
  r.frequency_penalty = INFINITY;
  EXPECT_THROW(bad(r), Error);
  r = SamplingRow{};
  r.num_logprobs = 21;
  EXPECT_THROW(run_sample(logits, {r}, {}, 21), Error);
  r.num_logprobs = 2;
  EXPECT_THROW(run_sample(logits, {r}), Error);         // logprob outputs missing
  EXPECT_THROW(run_sample(logits, {r}, {}, 1), Error);  // too few top slots
  EXPECT_THROW(run_sample(logits, {}), Error);          // rows do not match the batch

  // Entries: out of the vocabulary, not increasing, a bad flag, a NaN bias.
  auto with_entries = [&](std::vector<int32_t> tokens, std::vector<int32_t> in_prompt,
                          std::vector<float> bias) {
    ops::SampleArgs a;
    a.logits = logits;
    a.rows = {SamplingRow{}};
    const int64_t n = static_cast<int64_t>(tokens.size());
    a.entry_offsets = Tensor::empty({2}, DType::I32);
    a.entry_offsets.data<int32_t>()[0] = 0;
    a.entry_offsets.data<int32_t>()[1] = static_cast<int32_t>(n);
    a.entry_tokens = Tensor::empty({n}, DType::I32);
    a.entry_counts = Tensor::zeros({n}, DType::I32);
    a.entry_in_prompt = Tensor::empty({n}, DType::I32);
    a.entry_bias = Tensor::empty({n}, DType::F32);
    std::copy(tokens.begin(), tokens.end(), a.entry_tokens.data<int32_t>());
    std::copy(in_prompt.begin(), in_prompt.end(), a.entry_in_prompt.data<int32_t>());
    std::copy(bias.begin(), bias.end(), a.entry_bias.data<float>());
    a.ids = Tensor::empty({1}, DType::I32);
    OpContext ctx;
    ops::run(ctx, a);
    return a.ids.data<int32_t>()[0];
  };
  EXPECT_EQ(with_entries({0, 1}, {0, 0}, {3.f, 0.f}), 0);  // valid: bias 3 makes token 0 win
  EXPECT_THROW(with_entries({0, 2}, {0, 0}, {0.f, 0.f}), Error);
  EXPECT_THROW(with_entries({1, 0}, {0, 0}, {0.f, 0.f}), Error);
  EXPECT_THROW(with_entries({0, 0}, {0, 0}, {0.f, 0.f}), Error);
  EXPECT_THROW(with_entries({0}, {2}, {0.f}), Error);
  EXPECT_THROW(with_entries({0}, {0}, {NAN}), Error);
  EXPECT_THROW(with_entries({0}, {0}, {INFINITY}), Error);
}

TEST(SamplingEntries, MergesPerTokenAndSortsIds) {
  ops::SampleArgs a;
  a.logits = Tensor::empty({3, 10}, DType::F32);
  ops::SamplingEntries se;
  se.begin_row();
  se.add_penalty_token(7, 1, false);
  se.add_bias(2, 0.5f);
  se.add_penalty_token(2, 0, true);
  se.add_penalty_token(7, 2, true);
  se.add_bias(2, 0.25f);
  se.begin_row();  // no entries
  se.begin_row();
  se.add_bias(9, -INFINITY);
  se.fill(a);
  ASSERT_TRUE(a.entry_offsets.defined());
  auto i32 = [](const Tensor& t) {
    return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  };
  EXPECT_EQ(i32(a.entry_offsets), (std::vector<int32_t>{0, 2, 2, 3}));
  EXPECT_EQ(i32(a.entry_tokens), (std::vector<int32_t>{2, 7, 9}));
  EXPECT_EQ(i32(a.entry_counts), (std::vector<int32_t>{0, 3, 0}));
  EXPECT_EQ(i32(a.entry_in_prompt), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(a.entry_bias.data<float>()[0], 0.75f);
  EXPECT_EQ(a.entry_bias.data<float>()[1], 0.f);
  EXPECT_EQ(a.entry_bias.data<float>()[2], -INFINITY);
  EXPECT_THROW(se.add_bias(1, NAN), Error);
  ops::SamplingEntries none;
  for (int i = 0; i < 3; ++i)
    none.begin_row();
  none.fill(a);
  EXPECT_FALSE(a.entry_offsets.defined());
  ops::SamplingEntries short_rows;
  short_rows.begin_row();
  EXPECT_THROW(short_rows.fill(a), Error);
}

}  // namespace
}  // namespace strata::reftest
