// Cases: sample. Every path (greedy, race, min_p, top-k, top-p, their mixes), penalties and
// logit bias (sparse entries, bans included), logprobs, the non-finite flag; B past one launch
// (256 rows) and past 1024, odd vocabularies up to 262144. The device must pick the host's
// token for every row (same processed logits, same Gumbel noise up to an f64 ulp), flag the
// same rows and report the same top ids and ranks; logprob values within f32 tolerance.
#include "cases_util.h"
#include "ops/sample_plan.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

struct Mix {
  bool penalties = false;  // half the rows get penalty / bias entries
  bool logprobs = false;   // rows ask for -1..20 logprobs (K = 20)
  bool only_race = false;  // no sorted rows (the decode-time common case)
};

SamplingRow random_row(int64_t b, Rng& rng, const Mix& mix) {
  const SamplingRow kinds[] = {
      {0.f, 0, 1.f, 0, 0},      // greedy
      {0.7f, 0, 1.f, 0, 0},     // temperature only: the race
      {1.f, 50, 1.f, 0, 0},     // top-k
      {0.8f, 0, 0.9f, 0, 0},    // top-p
      {1.2f, 40, 0.95f, 0, 0},  // both
      {1.f, 1, 1.f, 0, 0},      // top-1: greedy by the sorted path
      {1.1f, 0, 1.f, 0, 0},     // min_p on the race (set below)
      {0.9f, 0, 0.8f, 0, 0},    // min_p with top-p (set below)
  };
  SamplingRow r = kinds[mix.only_race ? 1 + 5 * (b % 2) : b % 8];
  if (b % 8 == 6 || b % 8 == 7 || (mix.only_race && b % 2 == 1)) r.min_p = 0.05f;
  r.seed = rng.next();
  r.step = rng.next() % 1000;
  if (mix.penalties && b % 2 == 0) {
    r.repetition_penalty = rng.uniform(0.7f, 1.8f);
    r.frequency_penalty = rng.uniform(-0.5f, 1.f);
    r.presence_penalty = rng.uniform(-0.5f, 1.f);
  }
  if (mix.logprobs) r.num_logprobs = static_cast<int32_t>(b % 23) - 2;  // -2 -> -1 below
  r.num_logprobs = std::max(r.num_logprobs, -1);
  r.num_logprobs = std::min(r.num_logprobs, 20);
  return r;
}

// Entries for half the rows: ~1% of the vocabulary (at least 3 tokens) with output counts,
// prompt flags and biases, and a few bans.
void add_entries(SampleArgs& a, int64_t B, int64_t V, Rng& rng) {
  SamplingEntries se;
  for (int64_t b = 0; b < B; ++b) {
    se.begin_row();
    if (b % 2 != 0) continue;
    const int64_t n = std::max<int64_t>(3, V / 100);
    for (int32_t t : distinct(rng, std::min(n, V), V)) {
      const int kind = rng.int_in(0, 9);
      if (kind < 6) se.add_penalty_token(t, rng.int_in(0, 3), rng.int_in(0, 1) == 1);
      if (kind >= 4 && kind < 9) se.add_bias(t, rng.uniform(-3.f, 3.f));
      if (kind == 9 && t != 0) se.add_bias(t, -INFINITY);
    }
  }
  se.fill(a);
}

Outcome run_sample_case(Rng& rng, int64_t B, int64_t V, float spread, const Mix& mix,
                        bool poison_rows = false) {
  SampleArgs a;
  a.logits = wide_rows(rng, B, V, 3, 1, DType::F32, spread);  // rows of a wider buffer
  for (int64_t b = 0; b < B; ++b)
    a.rows.push_back(random_row(b, rng, mix));
  if (mix.penalties) add_entries(a, B, V, rng);
  a.ids = Tensor::empty(Shape{B}, DType::I32);
  a.nonfinite = Tensor::empty(Shape{B}, DType::I32);
  if (mix.logprobs) {
    a.sampled_logprob = Tensor::empty(Shape{B}, DType::F32);
    a.sampled_rank = Tensor::empty(Shape{B}, DType::I32);
    a.top_ids = Tensor::empty(Shape{B, 20}, DType::I32);
    a.top_logprobs = Tensor::empty(Shape{B, 20}, DType::F32);
  }
  if (poison_rows) {  // a NaN, +inf and -inf in three rows
    float* l = a.logits.data<float>();
    const int64_t ld = a.logits.stride(0);
    l[1 * ld + V / 2] = NAN;
    l[2 * ld + V - 1] = INFINITY;
    l[(B - 1) * ld] = -INFINITY;
  }
  // Logprobs: CUDA expf / log (<= 2 ulp each) in the log-sum-exp, f32 output rounding.
  Tolerance tol;
  tol.math = 2;
  return run_case(a, DType::F32, tol);
}

std::vector<OpCase> sample_cases() {
  struct S {
    const char* name;
    int64_t B, V;
    float spread;
    Mix mix;
    bool poison = false;
  };
  const S shapes[] = {
      {"nano3 vocab", 8, Nano3::vocab, 3.f, {}},
      {"nano3 vocab, flat", 8, Nano3::vocab, 0.3f, {}},
      {"nano3 vocab, penalties, logprobs", 16, Nano3::vocab, 3.f, {true, true, false}},
      {"odd vocab", 5, 1031, 2.f, {}},
      {"odd vocab, penalties, logprobs", 23, 1031, 2.f, {true, true, false}},
      {"300 rows (two launches, three sort chunks)", 300, 257, 2.f, {false, true, false}},
      {"1030 rows, penalties", 1030, 4099, 2.f, {true, true, false}},
      {"decode B=256 race rows, penalties", 256, Nano3::vocab, 3.f, {true, false, true}},
      {"vocab 262144 (32 KiB bitmap), penalties", 8, 262144, 3.f, {true, true, false}},
      {"non-finite rows", 10, 5003, 2.f, {true, true, false}, true},
  };
  std::vector<OpCase> out;
  for (const S& s : shapes)
    out.push_back(
        {"sample", fmt::format("{} B={} V={} logits sd {}", s.name, s.B, s.V, s.spread), true,
         [s](Rng& rng) { return run_sample_case(rng, s.B, s.V, s.spread, s.mix, s.poison); }});
  out.push_back({"sample", "greedy only B=3 V=131072 (no sort)", true, [](Rng& rng) {
                   SampleArgs a;
                   a.logits = normal_tensor(rng, Shape{3, Nano3::vocab}, DType::F32, 3.f);
                   a.rows.assign(3, SamplingRow{});
                   a.ids = Tensor::empty(Shape{3}, DType::I32);
                   return run_case(a, DType::F32, Tolerance{});
                 }});
  return out;
}

}  // namespace

STRATA_OP_CASES(sample_cases);

}  // namespace strata::opstest
