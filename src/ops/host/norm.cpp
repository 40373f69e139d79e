// Host RMSNorm (with vLLM's fused residual add) and the Mamba2 gated grouped RMSNorm.
// Rounding points follow vLLM (spec 3.1, 3.2 step 7): the residual sum is stored in act; the
// normalized value is cast to act before the weight multiply; the product is stored in act.
// "act" is out's dtype (x's or y's when only the e4m3 copy out_q is written); for f32 models
// every cast is an identity.
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

// `out` (optional when out_q is given) as [T, W] act rows on the host.
bool out_rows_ok(ArgCheck& c, const Tensor& out, int64_t T, int64_t W) {
  return !out.defined() ||
         (c.host(out, "out") && c.float_act(out, "out") && c.rows(out, "out", T, W));
}

bool rms_norm_supports(const RmsNormArgs& a, std::string* why) {
  ArgCheck c("rms_norm", why);
  if (!(c.host(a.x, "x") && c.host(a.weight, "weight"))) return false;
  if (a.residual.defined() && !c.host(a.residual, "residual")) return false;
  if (!c.that(a.x.rank() == 2, "x must be 2-D [T, H]")) return false;
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  if (!(c.float_act(a.x, "x") && c.rows(a.x, "x", T, H) && c.float_act(a.weight, "weight") &&
        c.vec(a.weight, "weight", H) && out_rows_ok(c, a.out, T, H) &&
        quantized_out_ok(c, a.out, a.out_q, a.out_q_scale, T, H)))
    return false;
  if (a.residual.defined() &&
      !(c.float_act(a.residual, "residual") && c.rows(a.residual, "residual", T, H)))
    return false;
  if (a.x2.defined() &&
      !(c.host(a.x2, "x2") && c.float_act(a.x2, "x2") && c.rows(a.x2, "x2", T, H)))
    return false;
  return c.that(H > 0, "H must be > 0") && c.that(a.eps >= 0.f, "eps must be >= 0");
}

void rms_norm_run(const RmsNormArgs& a, OpContext&) {
  const RowsView x(a.x);
  const bool has_out = a.out.defined(), has_q = a.out_q.defined();
  const RowsView out = has_out ? RowsView(a.out) : RowsView(a.x);
  const bool has_res = a.residual.defined();
  const RowsView res = has_res ? RowsView(a.residual) : RowsView(a.x);
  const bool has_x2 = a.x2.defined();
  const RowsView x2 = has_x2 ? RowsView(a.x2) : RowsView(a.x);
  const std::vector<float> w = load_vector(a.weight);
  const int64_t H = x.cols;
  const DType act = out.dtype;  // x's when only out_q is written
  parallel_for(x.rows, [&](int64_t t0, int64_t t1) {
    std::vector<float> v(static_cast<size_t>(H)), r(static_cast<size_t>(H));
    for (int64_t t = t0; t < t1; ++t) {
      x.load(t, v.data());
      if (has_x2) {  // the add op's sum, rounded as it stores it
        x2.load(t, r.data());
        for (int64_t i = 0; i < H; ++i)
          v[i] = round_to(x.dtype, v[i] + r[i]);
      }
      if (has_res) {
        res.load(t, r.data());
        for (int64_t i = 0; i < H; ++i)
          v[i] += r[i];
        res.store(t, v.data());
        // Normalize what was stored (the residual stream lives in act).
        for (int64_t i = 0; i < H; ++i)
          v[i] = round_to(res.dtype, v[i]);
      }
      const float inv =
          1.0f / std::sqrt(dot_f32(v.data(), v.data(), H) / static_cast<float>(H) + a.eps);
      for (int64_t i = 0; i < H; ++i)
        v[i] = round_to(act, v[i] * inv) * w[static_cast<size_t>(i)];
      if (has_out) out.store(t, v.data());
      if (has_q) store_quantized_row(a.out_q, a.out_q_scale, act, t, H, v.data());
    }
  });
}

bool gated_rms_norm_supports(const GatedRmsNormArgs& a, std::string* why) {
  ArgCheck c("gated_rms_norm", why);
  if (!(c.host(a.y, "y") && c.host(a.z, "z") && c.host(a.weight, "weight"))) return false;
  if (!c.that(a.y.rank() == 2, "y must be 2-D [T, D]")) return false;
  const int64_t T = a.y.dim(0), D = a.y.dim(1);
  if (!(c.float_act(a.y, "y") && c.rows(a.y, "y", T, D) && c.float_act(a.z, "z") &&
        c.rows(a.z, "z", T, D) && c.float_act(a.weight, "weight") && c.vec(a.weight, "weight", D) &&
        out_rows_ok(c, a.out, T, D) && quantized_out_ok(c, a.out, a.out_q, a.out_q_scale, T, D)))
    return false;
  if (a.groups < 1 || D % a.groups != 0)
    return c.fail("groups = {} must be >= 1 and divide D = {}", a.groups, D);
  return c.that(D > 0, "D must be > 0") && c.that(a.eps >= 0.f, "eps must be >= 0");
}

void gated_rms_norm_run(const GatedRmsNormArgs& a, OpContext&) {
  const bool has_out = a.out.defined(), has_q = a.out_q.defined();
  const RowsView y(a.y), z(a.z), out = has_out ? RowsView(a.out) : RowsView(a.y);
  const std::vector<float> w = load_vector(a.weight);
  const int64_t D = y.cols, group = D / a.groups;
  const DType act = out.dtype;
  parallel_for(y.rows, [&](int64_t t0, int64_t t1) {
    std::vector<float> v(static_cast<size_t>(D)), g(static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      y.load(t, v.data());
      z.load(t, g.data());
      for (int64_t i = 0; i < D; ++i)
        v[i] *= silu(g[i]);  // gate first (norm_before_gate=False)
      for (int64_t g0 = 0; g0 < D; g0 += group) {
        float* vg = v.data() + g0;
        const float inv =
            1.0f / std::sqrt(dot_f32(vg, vg, group) / static_cast<float>(group) + a.eps);
        for (int64_t i = 0; i < group; ++i)
          vg[i] = round_to(act, vg[i] * inv) * w[static_cast<size_t>(g0 + i)];
      }
      if (has_out) out.store(t, v.data());
      if (has_q) store_quantized_row(a.out_q, a.out_q_scale, act, t, D, v.data());
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(RmsNormArgs, "host", Device::Host, rms_norm_supports, rms_norm_run);
STRATA_REGISTER_KERNEL(GatedRmsNormArgs, "host", Device::Host, gated_rms_norm_supports,
                       gated_rms_norm_run);

}  // namespace strata::ops::host
