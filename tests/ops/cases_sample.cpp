// Cases: sample. Greedy and seeded random rows (temperature, top-k, top-p and their mixes);
// the device must pick the host's token exactly (same order, same uniform; a flip needs a draw
// within f64 rounding of a boundary).
#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

std::vector<SamplingRow> mixed_rows(int64_t B, Rng& rng) {
  const SamplingRow kinds[] = {
      {0.f, 0, 1.f, 0, 0},      // greedy
      {0.7f, 0, 1.f, 0, 0},     // temperature only
      {1.f, 50, 1.f, 0, 0},     // top-k
      {0.8f, 0, 0.9f, 0, 0},    // top-p
      {1.2f, 40, 0.95f, 0, 0},  // both
      {1.f, 1, 1.f, 0, 0},      // top-1: greedy by another path
  };
  std::vector<SamplingRow> rows;
  for (int64_t b = 0; b < B; ++b) {
    SamplingRow r = kinds[b % 6];
    r.seed = rng.next();
    r.step = rng.next() % 1000;
    rows.push_back(r);
  }
  return rows;
}

std::vector<OpCase> sample_cases() {
  struct S {
    const char* name;
    int64_t B, V;
    float spread;
  };
  const S shapes[] = {{"nano3 vocab", 6, Nano3::vocab, 3.f},
                      {"nano3 vocab, flat", 6, Nano3::vocab, 0.3f},
                      {"odd", 5, 1031, 2.f},
                      {"70 rows (two launches)", 70, 257, 2.f}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    out.push_back({"sample", fmt::format("{} B={} V={} logits sd {}", s.name, s.B, s.V, s.spread),
                   true, [s](Rng& rng) {
                     SampleArgs a;
                     // Logits as a view: rows of a wider buffer.
                     a.logits = wide_rows(rng, s.B, s.V, 3, 1, DType::F32, s.spread);
                     a.rows = mixed_rows(s.B, rng);
                     a.ids = Tensor::empty(Shape{s.B}, DType::I32);
                     return run_case(a, DType::F32, Tolerance{});
                   }});
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
