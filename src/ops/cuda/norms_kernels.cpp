// Registrations of rms_norm and gated_rms_norm on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/norms.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::GatedRmsNormArgs;
using ops::RmsNormArgs;

bool rms_norm_supports(const RmsNormArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.x, "x").on_device(a.weight, "weight").act(a.x, "x");
  c.same_dtype(a.x, a.weight, "x", "weight").rows(a.x, -1, -1, "x");
  if (!c) return false;
  c.contiguous(a.weight, Shape{a.x.dim(1)}, "weight");
  if (a.out.defined())
    c.on_device(a.out, "out")
        .same_dtype(a.x, a.out, "x", "out")
        .rows(a.out, a.x.dim(0), a.x.dim(1), "out");
  check_quantized_out(c, a.out, a.out_q, a.out_q_scale, a.x.dim(0), a.x.dim(1));
  if (a.residual.defined()) {
    c.on_device(a.residual, "residual").same_dtype(a.x, a.residual, "x", "residual");
    c.rows(a.residual, a.x.dim(0), a.x.dim(1), "residual");
    c.require(!a.out.defined() || a.residual.raw() != a.out.raw(), "out must not alias residual");
  }
  if (a.x2.defined()) {
    c.on_device(a.x2, "x2").same_dtype(a.x, a.x2, "x", "x2");
    c.rows(a.x2, a.x.dim(0), a.x.dim(1), "x2");
  }
  return c;
}
void rms_norm_run(const RmsNormArgs& a, OpContext& ctx) {
  launch_rms_norm(mat_of(a.x), opt_mat_of(a.x2), opt_mat_of(a.residual), vec_of(a.weight), a.eps,
                  opt_mat_of(a.out), quant_out_of(a.out_q, a.out_q_scale), stream_of(ctx));
}

bool gated_supports(const GatedRmsNormArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.y, "y").on_device(a.z, "z").on_device(a.weight, "weight");
  c.act(a.y, "y").same_dtype(a.y, a.z, "y", "z").same_dtype(a.y, a.weight, "y", "weight");
  c.rows(a.y, -1, -1, "y");
  if (!c) return false;
  const int64_t D = a.y.dim(1);
  c.require(a.groups >= 1 && D % a.groups == 0,
            fmt::format("groups {} must divide the width {} of y", a.groups, D));
  c.rows(a.z, a.y.dim(0), D, "z").contiguous(a.weight, Shape{D}, "weight");
  if (a.out.defined())
    c.on_device(a.out, "out").same_dtype(a.y, a.out, "y", "out").rows(a.out, a.y.dim(0), D, "out");
  check_quantized_out(c, a.out, a.out_q, a.out_q_scale, a.y.dim(0), D);
  c.require(a.groups <= 65535, "at most 65535 groups");
  return c;
}
void gated_run(const GatedRmsNormArgs& a, OpContext& ctx) {
  launch_gated_rms_norm(mat_of(a.y), mat_of(a.z), vec_of(a.weight), a.groups, a.eps,
                        opt_mat_of(a.out), quant_out_of(a.out_q, a.out_q_scale), stream_of(ctx));
}

// One warp per (row, group): aligned rows, groups of at most 256 16-byte chunks.
bool gated_warp_supports(const GatedRmsNormArgs& a, std::string* why) {
  if (!gated_supports(a, why)) return false;
  ArgCheck c(why);
  c.require(!kernel_disabled(GatedRmsNormArgs::kName, "cuda.warp"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  c.require(a.y.dim(0) >= warp_form_min_rows(),
            fmt::format("{} rows (the warp form from {})", a.y.dim(0), warp_form_min_rows()));
  c.require(gated_rms_norm_warp_fits(mat_of(a.y), mat_of(a.z), vec_of(a.weight), a.groups,
                                     opt_mat_of(a.out), quant_out_of(a.out_q, a.out_q_scale)),
            fmt::format("rows not 16-byte aligned or groups wider than {} chunks of 16 bytes",
                        32 * kWarpMaxChunksPerLane));
  return c;
}
void gated_warp_run(const GatedRmsNormArgs& a, OpContext& ctx) {
  launch_gated_rms_norm_warp(mat_of(a.y), mat_of(a.z), vec_of(a.weight), a.groups, a.eps,
                             opt_mat_of(a.out), quant_out_of(a.out_q, a.out_q_scale),
                             stream_of(ctx));
}

}  // namespace

// The first that supports the arguments runs; STRATA_CUDA_DISABLE_KERNELS=gated_rms_norm:cuda.warp
// gives the block form for A/B.
STRATA_REGISTER_KERNEL(RmsNormArgs, "cuda", Device::Cuda, rms_norm_supports, rms_norm_run);
STRATA_REGISTER_KERNEL(GatedRmsNormArgs, "cuda.warp", Device::Cuda, gated_warp_supports,
                       gated_warp_run);
STRATA_REGISTER_KERNEL(GatedRmsNormArgs, "cuda", Device::Cuda, gated_supports, gated_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
