// Cases: sample at the exact top-p boundary. Equal logits give p = exp(0) = 1 per token on both
// sides, so every mass is an exact integer: with top_p 0.5 over 4 tokens (or 0.25 over 16) the
// kept prefix reaches the needed mass exactly at its last token, and a kernel that compares with
// ">" instead of ">=" keeps one token more and draws it for about a third (a fifth) of the rows.
// The device must pick the host's token in every row (the general sampler cases are in
// cases_sample.cpp).
#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

std::vector<OpCase> top_p_boundary_cases() {
  struct S {
    int64_t V;
    float top_p;
  };
  std::vector<OpCase> out;
  for (const S s : {S{4, 0.5f}, S{16, 0.25f}})
    out.push_back({"sample", fmt::format("top-p boundary: {} equal logits, top_p {}", s.V, s.top_p),
                   true, [s](Rng& rng) {
                     const int64_t B = 64;
                     SampleArgs a;
                     a.logits = Tensor::empty(Shape{B, s.V}, DType::F32);
                     for (int64_t i = 0; i < B * s.V; ++i)
                       a.logits.data<float>()[i] = 1.5f;
                     for (int64_t b = 0; b < B; ++b)
                       a.rows.push_back({1.f, 0, s.top_p, rng.next(), rng.next() % 1000});
                     a.ids = Tensor::empty(Shape{B}, DType::I32);
                     return run_case(a, DType::F32, Tolerance{});
                   }});
  return out;
}

}  // namespace

STRATA_OP_CASES(top_p_boundary_cases);

}  // namespace strata::opstest
