// Registrations of the elementwise ops (relu2, add, cast) on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/elementwise.h"
#include "ops/cuda/kernel_support.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::AddArgs;
using ops::CastArgs;
using ops::Relu2Args;

bool relu2_supports(const Relu2Args& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.x, "x").act(a.x, "x").rows(a.x, -1, -1, "x");
  if (!c) return false;
  if (a.out.defined())
    c.on_device(a.out, "out")
        .same_dtype(a.x, a.out, "x", "out")
        .rows(a.out, a.x.dim(0), a.x.dim(1), "out");
  check_quantized_out(c, a.out, a.out_q, a.out_q_scale, a.x.dim(0), a.x.dim(1));
  return c;
}
void relu2_run(const Relu2Args& a, OpContext& ctx) {
  launch_relu2(mat_of(a.x), opt_mat_of(a.out), quant_out_of(a.out_q, a.out_q_scale),
               stream_of(ctx));
}

bool add_supports(const AddArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.a, "a").on_device(a.b, "b").on_device(a.out, "out").act(a.a, "a");
  c.same_dtype(a.a, a.b, "a", "b").same_dtype(a.a, a.out, "a", "out").rows(a.a, -1, -1, "a");
  if (c) c.rows(a.b, a.a.dim(0), a.a.dim(1), "b").rows(a.out, a.a.dim(0), a.a.dim(1), "out");
  return c;
}
void add_run(const AddArgs& a, OpContext& ctx) {
  launch_add(mat_of(a.a), mat_of(a.b), mat_of(a.out), stream_of(ctx));
}

bool is_cast_float(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

bool cast_supports(const CastArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.x, "x").on_device(a.out, "out");
  c.require(is_cast_float(a.x.dtype()) && is_cast_float(a.out.dtype()),
            fmt::format("cast {} -> {}: only f32, bf16 and f16", dtype_name(a.x.dtype()),
                        dtype_name(a.out.dtype())));
  if (c) c.contiguous(a.x, a.x.shape(), "x").contiguous(a.out, a.x.shape(), "out");
  return c;
}
void cast_run(const CastArgs& a, OpContext& ctx) {
  launch_cast(vec_of(a.x), vec_of(a.out), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(Relu2Args, "cuda", Device::Cuda, relu2_supports, relu2_run);
STRATA_REGISTER_KERNEL(AddArgs, "cuda", Device::Cuda, add_supports, add_run);
STRATA_REGISTER_KERNEL(CastArgs, "cuda", Device::Cuda, cast_supports, cast_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
