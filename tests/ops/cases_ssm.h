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

}  // namespace strata::opstest
