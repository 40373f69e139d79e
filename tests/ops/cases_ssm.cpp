// Tolerances shared by the SSM case tables (declared in cases_ssm.h).
#include "cases_ssm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::opstest {

using ops::SsmScanArgs;

// y sums N state terms (and, chunked, up to `chunk` positions of N-term products); softplus,
// exp and the decay exps.
Tolerance ssm_tolerance(int64_t chunk, int64_t N) {
  Tolerance tol;
  tol.reduction = chunk * N;
  tol.math = 3;
  return tol;
}

// bf16 runs may take the tensor-core kernel, which rounds three operands to bf16 before their
// products, as vLLM's Triton SSD kernels do (tl.dot on the input dtype): the decayed scores
// CB[l][s] exp(cum_l - cum_s) dt_s (Y_diag), the decay-weighted rows w_s B_s of the chunk states
// (hence the final state and every later chunk's Y_off) and the carried state S_in (Y_off),
// once per chunk product. The reference is the host op in f32 on the same bf16 inputs, which
// rounds none of them. Each rounding is a relative error of at most u_bf16 on one term of a
// sum; with random signs the terms' errors add like the terms do, so each rounded operand
// moves its sum by ~u_bf16 of the sum's size: 2 u_bf16 * rms per operand in the harness's form
// (roundings_before_sum = 3). A sum dominated by one term (the diagonal score of a fast-decaying
// head, a single state term) keeps that term's own rounding: 2 u_bf16 relative (roundings = 1).
// An f64 emulation of exactly these roundings on the nano3 case's data lands at ~0.5 of this
// tolerance (y and final state). f32 runs round nothing: the f32 tolerance is unchanged.
void add_bf16_operand_rounding(Tolerance& tol, DType act) {
  if (act != DType::BF16) return;
  tol.roundings = 1;
  tol.roundings_before_sum = 3;
}

// The chunked scan's decay exp(cum_l - cum_s) subtracts two running sums of dt * A; each
// carries f32 rounding of up to |cum| * u, which the exp turns into a relative error. |cum| is
// largest at a chunk's end: the largest sum over a chunk of dt * |A| bounds it (4 u: both sums,
// two ulps each).
double scan_decay_rel(const SsmScanArgs& a, const std::vector<int32_t>& lens) {
  double worst = 0.0;
  int64_t t0 = 0;
  for (int32_t len : lens) {
    for (int64_t c0 = 0; c0 < len; c0 += a.chunk_size)
      for (int64_t h = 0; h < a.heads; ++h) {
        double cum = 0.0;
        for (int64_t t = c0; t < std::min<int64_t>(len, c0 + a.chunk_size); ++t) {
          const double v = load_as_f64(a.dt_raw.raw(), a.dt_raw.dtype(),
                                       static_cast<size_t>((t0 + t) * a.dt_raw.stride(0) + h)) +
                           load_as_f64(a.dt_bias.raw(), a.dt_bias.dtype(), static_cast<size_t>(h));
          const double dt = v > 20 ? v : std::log1p(std::exp(v));
          cum += dt * std::fabs(static_cast<double>(a.A.data<float>()[h]));
        }
        worst = std::max(worst, cum);
      }
    t0 += len;
  }
  return 4.0 * worst * unit_roundoff(DType::F32);
}

// The bf16 state-path rounding bound (cases_ssm.h says why).
Tensor state_rounding_bound(const SsmScanArgs& a, int64_t t0, int64_t len) {
  const int64_t Hm = a.heads, P = a.head_dim, N = a.state_size, per_g = Hm / a.groups;
  Tensor out = Tensor::empty(Shape{1, Hm, P, N}, DType::F32);
  std::vector<double> acc(static_cast<size_t>(P * N)), w(static_cast<size_t>(len));
  const double u = unit_roundoff(DType::BF16);
  for (int64_t h = 0; h < Hm; ++h) {
    const double A = a.A.data<float>()[h];
    const float bias =
        static_cast<float>(load_as_f64(a.dt_bias.raw(), a.dt_bias.dtype(), static_cast<size_t>(h)));
    double later = 0.0;  // sum of dt over the tokens after s
    for (int64_t s = len - 1; s >= 0; --s) {
      const float z =
          static_cast<float>(load_as_f64(a.dt_raw.raw(), a.dt_raw.dtype(),
                                         static_cast<size_t>((t0 + s) * a.dt_raw.stride(0) + h))) +
          bias;
      const double dt = z > 20.f ? z : std::log1p(std::exp(static_cast<double>(z)));
      w[static_cast<size_t>(s)] = std::exp(A * later) * dt;
      later += dt;
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    const int64_t g = h / per_g;
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = t0 + s;
      for (int64_t p = 0; p < P; ++p) {
        const double xw =
            w[static_cast<size_t>(s)] *
            std::fabs(load_as_f64(a.x.raw(), a.x.dtype(),
                                  static_cast<size_t>(t * a.x.stride(0) + h * P + p)));
        double* row = acc.data() + p * N;
        for (int64_t n = 0; n < N; ++n)
          row[n] += xw * std::fabs(load_as_f64(a.B.raw(), a.B.dtype(),
                                               static_cast<size_t>(t * a.B.stride(0) + g * N + n)));
      }
    }
    float* o = out.data<float>() + h * P * N;
    for (int64_t i = 0; i < P * N; ++i)
      o[i] = static_cast<float>(u * acc[static_cast<size_t>(i)] * (1.0 + 1e-6));
  }
  return out;
}

}  // namespace strata::opstest
