// Parameters and tolerances shared by the SSM case tables (cases_mamba.cpp,
// cases_isolation.cpp).
#pragma once

#include <cmath>
#include <vector>

#include "cases_util.h"

namespace strata::opstest {

// Fills the per-head parameters the way Mamba2 initializes them: A in [-16, -1], dt_bias the
// inverse softplus of dt in [1e-3, 1e-1], D around 1; the state starts away from zero.
template <class A>
void ssm_params(A& a, Rng& rng, int64_t Hm, DType param) {
  a.A = Tensor::empty(Shape{Hm}, DType::F32);
  Tensor dtb = Tensor::empty(Shape{Hm}, DType::F32);
  for (int64_t h = 0; h < Hm; ++h) {
    a.A.template data<float>()[h] = -std::exp(rng.uniform(0.f, 2.77f));
    const float dt0 = std::exp(rng.uniform(std::log(1e-3f), std::log(1e-1f)));
    dtb.data<float>()[h] = std::log(std::expm1(dt0));
  }
  a.D = uniform_tensor(rng, Shape{Hm}, param, 0.5f, 1.5f);
  if (param == DType::F32) {
    a.dt_bias = dtb;
  } else {
    a.dt_bias = Tensor::empty(Shape{Hm}, param);
    for (int64_t h = 0; h < Hm; ++h)
      store_from_f32(a.dt_bias.raw(), param, static_cast<size_t>(h), dtb.data<float>()[h]);
  }
}

// y sums N state terms (and, chunked, up to `chunk` positions of N-term products); softplus,
// exp and the decay exps.
Tolerance ssm_tolerance(int64_t chunk, int64_t N);

// Widens `tol` for the tensor-core scan's three bf16 operand roundings (cases_ssm.cpp says why).
void add_bf16_operand_rounding(Tolerance& tol, DType act);

// The relative error of the chunked decay exp(cum_l - cum_s) over the sequences `lens` of `a`.
double scan_decay_rel(const ops::SsmScanArgs& a, const std::vector<int32_t>& lens);

// A bound on the tensor-core scans' final-state error from their one bf16 rounding on the state
// path (rounding 1 of cases_ssd_mma_exact.cpp: bf16(w_s B_s[n]) before its product with x_s[p];
// the carried state stays f32). Each rounded value errs by at most u_bf16 of itself and reaches
// the final state scaled by x_s[p] and by the decay from its chunk's end to the sequence's end,
// so, summing the worst cases,
//   |err[h][p][n]| <= u_bf16 * sum_s exp(A_h sum_{j>s} dt_j) dt_s |x_s[p]| |B_s[n]|
// (first order; the f32 terms stay in the harness's tolerance). The harness's own bf16 term
// (2 u_bf16 per rounded operand times the output's rms) assumes the terms are of the output's
// scale. Per sequence slot they need not be: a fast-decaying head's state is a few terms of up to
// ~1 that may cancel far below the slot's rms (on the H200 one element of 65,536 / 524,288, in
// the final state of a fresh 300-token sequence, lay 3.7e-3 and 7.4e-3 off the f32 host op, 1.05
// and 1.16 times that tolerance, the same on every tensor-core kernel: a term ~1 rounded to
// bf16). Of the sequence of `len` tokens from row t0 of a's rows: [1, Hm, P, N] f32.
Tensor state_rounding_bound(const ops::SsmScanArgs& a, int64_t t0, int64_t len);

}  // namespace strata::opstest
