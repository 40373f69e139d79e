#include "ops/host/ssm_common.h"

#include <algorithm>

namespace strata::ops::host {

bool ssm_common_supports(ArgCheck& c, const SsmDims& d, int64_t rows, const Tensor& x,
                         const Tensor& dt_raw, const Tensor& A, const Tensor& B, const Tensor& C,
                         const Tensor& D, const Tensor& dt_bias, const Tensor& ssm_states,
                         const Tensor& out) {
  if (d.heads < 1 || d.head_dim < 1 || d.groups < 1 || d.state < 1)
    return c.fail("heads {}, head_dim {}, groups {}, state_size {} must all be >= 1", d.heads,
                  d.head_dim, d.groups, d.state);
  if (d.heads % d.groups != 0) return c.fail("groups {} must divide heads {}", d.groups, d.heads);
  if (!(c.host(x, "x") && c.host(dt_raw, "dt_raw") && c.host(A, "A") && c.host(B, "B") &&
        c.host(C, "C") && c.host(D, "D") && c.host(dt_bias, "dt_bias") &&
        c.host(ssm_states, "ssm_states") && c.host(out, "out")))
    return false;
  const int64_t HP = d.heads * d.head_dim, GN = d.groups * d.state;
  return c.float_act(x, "x") && c.rows(x, "x", rows, HP) && c.float_act(dt_raw, "dt_raw") &&
         c.rows(dt_raw, "dt_raw", rows, d.heads) && c.float_act(B, "B") &&
         c.rows(B, "B", rows, GN) && c.float_act(C, "C") && c.rows(C, "C", rows, GN) &&
         c.float_act(A, "A") && c.vec(A, "A", d.heads) && c.float_act(D, "D") &&
         c.vec(D, "D", d.heads) && c.float_act(dt_bias, "dt_bias") &&
         c.vec(dt_bias, "dt_bias", d.heads) && c.float_act(ssm_states, "ssm_states") &&
         c.that(ssm_states.rank() == 4, "ssm_states must be 4-D [S, Hm, P, N]") &&
         c.inner_contiguous(ssm_states, "ssm_states",
                            {ssm_states.dim(0), d.heads, d.head_dim, d.state}) &&
         c.float_act(out, "out") && c.rows(out, "out", rows, HP);
}

void load_head_state(const Tensor& states, int64_t slot, int64_t h, bool has_initial,
                     std::vector<float>& S) {
  const int64_t PN = states.dim(2) * states.dim(3);
  S.resize(static_cast<size_t>(PN));
  if (has_initial)
    load_f32(element_ptr(states, {slot, h, 0, 0}), states.dtype(), PN, S.data());
  else
    std::fill(S.begin(), S.end(), 0.f);
}

void store_head_state(const Tensor& states, int64_t slot, int64_t h, const std::vector<float>& S) {
  store_f32(element_ptr(states, {slot, h, 0, 0}), states.dtype(), static_cast<int64_t>(S.size()),
            S.data());
}

}  // namespace strata::ops::host
