// Shared pieces of the host Mamba2 SSM kernels (ssm_scan: chunked SSD prefill; ssm_update:
// one decode step): argument checks, per-head parameters and the state slot I/O.
#pragma once

#include <string>
#include <vector>

#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {

// Dimensions of one call: heads Hm, head_dim P, groups G, state N; heads h of group
// g = h / (Hm / G) share B[:, g] and C[:, g].
struct SsmDims {
  int64_t heads = 0, head_dim = 0, groups = 0, state = 0;
  int64_t group_of(int64_t h) const { return h / (heads / groups); }
};

// Checks everything the two ops share: dims, x / dt_raw / B / C / out row views over `rows`
// tokens, A / D / dt_bias vectors, ssm_states [S, Hm, P, N] contiguous below the slot index.
bool ssm_common_supports(ArgCheck& c, const SsmDims& d, int64_t rows, const Tensor& x,
                         const Tensor& dt_raw, const Tensor& A, const Tensor& B, const Tensor& C,
                         const Tensor& D, const Tensor& dt_bias, const Tensor& ssm_states,
                         const Tensor& out);

// Per-head parameters as f32.
struct SsmParams {
  std::vector<float> A, D, dt_bias;  // [Hm]
  SsmParams(const Tensor& a, const Tensor& d, const Tensor& bias)
      : A(load_vector(a)), D(load_vector(d)), dt_bias(load_vector(bias)) {}
};

// The [P, N] state of head h in `slot`, as f32; zeros when !has_initial.
void load_head_state(const Tensor& states, int64_t slot, int64_t h, bool has_initial,
                     std::vector<float>& S);
void store_head_state(const Tensor& states, int64_t slot, int64_t h, const std::vector<float>& S);

}  // namespace strata::ops::host
