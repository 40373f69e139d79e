// Registrations of conv1d_prefill and conv1d_update on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/conv1d.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::Conv1dPrefillArgs;
using ops::Conv1dUpdateArgs;

// Checks shared by both ops: weight [C, K], bias [C], states [S, K-1, C], all one act dtype.
void check_conv_params(ArgCheck& c, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& states, const Tensor& out) {
  c.on_device(x, "x")
      .on_device(weight, "weight")
      .on_device(bias, "bias")
      .on_device(states, "conv_states");
  c.on_device(out, "out")
      .act(x, "x")
      .same_dtype(x, weight, "x", "weight")
      .same_dtype(x, bias, "x", "bias");
  c.same_dtype(x, states, "x", "conv_states").same_dtype(x, out, "x", "out").rows(x, -1, -1, "x");
  c.require(weight.rank() == 2, fmt::format("weight {} must be [C, K]", weight.str()));
  if (!c) return;
  const int64_t C = x.dim(1), K = weight.dim(1);
  c.require(K >= 2 && K <= kMaxConvWidth,
            fmt::format("conv width {} outside 2..{}", K, kMaxConvWidth));
  c.contiguous(weight, Shape{C, K}, "weight").contiguous(bias, Shape{C}, "bias");
  c.require(states.rank() == 3, fmt::format("conv_states {} must be [S, K-1, C]", states.str()));
  if (c) c.contiguous(states, Shape{states.dim(0), K - 1, C}, "conv_states");
  c.rows(out, x.dim(0), C, "out");
}

Conv1dLaunch launch_of(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& states, const Tensor& out) {
  Conv1dLaunch p;
  p.x = mat_of(x);
  p.weight = weight.raw();
  p.bias = bias.raw();
  p.states = states.raw();
  p.num_slots = states.dim(0);
  p.width = weight.dim(1);
  p.out = mat_of(out);
  return p;
}

bool prefill_supports(const Conv1dPrefillArgs& a, std::string* why) {
  ArgCheck c(why);
  check_conv_params(c, a.x, a.weight, a.bias, a.conv_states, a.out);
  c.on_device(a.cu_seqlens, "cu_seqlens")
      .on_device(a.slots, "slots")
      .on_device(a.has_initial, "has_initial");
  c.dtype(a.cu_seqlens, DType::I32, "cu_seqlens").dtype(a.slots, DType::I32, "slots");
  c.dtype(a.has_initial, DType::I32, "has_initial");
  if (!c) return false;
  const int64_t B = a.slots.numel();
  c.require(B >= 1, "no sequences").contiguous(a.slots, Shape{B}, "slots");
  c.contiguous(a.cu_seqlens, Shape{B + 1}, "cu_seqlens")
      .contiguous(a.has_initial, Shape{B}, "has_initial");
  c.require(a.x.dim(1) <= 65535 * 128, "too many channels for one launch");
  // Each token's window reads the raw rows of earlier tokens, which other blocks would overwrite.
  c.require(a.out.storage() != a.x.storage(), "out must not share x's storage");
  return c;
}
void prefill_run(const Conv1dPrefillArgs& a, OpContext& ctx) {
  Conv1dLaunch p = launch_of(a.x, a.weight, a.bias, a.conv_states, a.out);
  p.cu_seqlens = vec_of(a.cu_seqlens);
  p.slots = vec_of(a.slots);
  p.has_initial = vec_of(a.has_initial);
  p.preload = !kernel_disabled(Conv1dPrefillArgs::kName, "cuda.preload");
  launch_conv1d_prefill(p, context_of(ctx).index_errors(), stream_of(ctx));
}

bool update_supports(const Conv1dUpdateArgs& a, std::string* why) {
  ArgCheck c(why);
  check_conv_params(c, a.x, a.weight, a.bias, a.conv_states, a.out);
  c.on_device(a.slots, "slots").dtype(a.slots, DType::I32, "slots");
  if (c) c.contiguous(a.slots, Shape{a.x.dim(0)}, "slots");
  c.require(a.x.dim(1) <= 65535 * 128, "too many channels for one launch");
  return c;
}
void update_run(const Conv1dUpdateArgs& a, OpContext& ctx) {
  Conv1dLaunch p = launch_of(a.x, a.weight, a.bias, a.conv_states, a.out);
  p.slots = vec_of(a.slots);
  launch_conv1d_update(p, context_of(ctx).index_errors(), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(Conv1dPrefillArgs, "cuda", Device::Cuda, prefill_supports, prefill_run);
STRATA_REGISTER_KERNEL(Conv1dUpdateArgs, "cuda", Device::Cuda, update_supports, update_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
