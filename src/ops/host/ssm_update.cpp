// Host Mamba2 selective state update (decode: one token per sequence), the sequential
// recurrence of spec 3.2 step 6, per head h of group g:
//   dt = softplus(dt_raw + dt_bias[h]);  dA = exp(dt * A[h])
//   S[p, n] = dA * S[p, n] + (dt * B[n]) * x[p]          (f32, state updated in its slot)
//   y[p]    = act(S[p, :] . C + D[h] * x[p])
// Work items are (sequence, head); out may alias x (a head reads its x before writing y).
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/ssm_common.h"

namespace strata::ops::host {
namespace {

bool ssm_update_supports(const SsmUpdateArgs& a, std::string* why) {
  ArgCheck c("ssm_update", why);
  const SsmDims d{a.heads, a.head_dim, a.groups, a.state_size};
  if (!c.defined(a.x, "x") || !c.that(a.x.rank() == 2, "x must be 2-D [B, Hm*P]")) return false;
  if (!ssm_common_supports(c, d, a.x.dim(0), a.x, a.dt_raw, a.A, a.B, a.C, a.D, a.dt_bias,
                           a.ssm_states, a.out))
    return false;
  return c.host(a.slots, "slots") && c.index_vec(a.slots, "slots", a.x.dim(0));
}

void ssm_update_run(const SsmUpdateArgs& a, OpContext&) {
  const std::vector<int32_t> slots = load_indices(a.slots);
  check_slots("ssm_update", slots, a.ssm_states.dim(0));
  const RowsView x(a.x), dt_raw(a.dt_raw), Bv(a.B), Cv(a.C), out(a.out);
  const SsmParams prm(a.A, a.D, a.dt_bias);
  const SsmDims d{a.heads, a.head_dim, a.groups, a.state_size};
  const int64_t Hm = d.heads, P = d.head_dim, N = d.state;
  parallel_for(
      static_cast<int64_t>(slots.size()) * Hm,
      [&](int64_t i0, int64_t i1) {
        std::vector<float> S, xs(static_cast<size_t>(P)), dB(static_cast<size_t>(N)),
            Cs(static_cast<size_t>(N)), y(static_cast<size_t>(P));
        for (int64_t item = i0; item < i1; ++item) {
          const int64_t b = item / Hm, h = item % Hm, g = d.group_of(h);
          const int32_t slot = slots[static_cast<size_t>(b)];
          load_head_state(a.ssm_states, slot, h, true, S);
          x.load(b, h * P, P, xs.data());
          Bv.load(b, g * N, N, dB.data());
          Cv.load(b, g * N, N, Cs.data());
          float raw;
          dt_raw.load(b, h, 1, &raw);
          const float dt = softplus(raw + prm.dt_bias[static_cast<size_t>(h)]);
          const float dA = std::exp(dt * prm.A[static_cast<size_t>(h)]);
          for (float& v : dB)
            v *= dt;
          for (int64_t p = 0; p < P; ++p) {
            float* Sp = S.data() + p * N;
            for (int64_t n = 0; n < N; ++n)
              Sp[n] = dA * Sp[n] + dB[n] * xs[p];
            y[p] = dot_f32(Sp, Cs.data(), N) + prm.D[static_cast<size_t>(h)] * xs[p];
          }
          out.store(b, h * P, P, y.data());
          store_head_state(a.ssm_states, slot, h, S);
        }
      },
      1);
}

}  // namespace

STRATA_REGISTER_KERNEL(SsmUpdateArgs, "host", Device::Host, ssm_update_supports, ssm_update_run);

}  // namespace strata::ops::host
