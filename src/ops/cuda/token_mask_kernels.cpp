// Registration of token_mask on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/token_mask.h"
#include "ops/token_mask_args.h"

namespace strata::cuda {
namespace {

using ops::TokenMaskArgs;

bool token_mask_supports(const TokenMaskArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.logits, "logits").on_device(a.mask, "mask");
  c.dtype(a.logits, DType::F32, "logits").dtype(a.mask, DType::I32, "mask");
  if (c) c.rows(a.logits, -1, -1, "logits");
  if (c) {
    const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
    c.contiguous(a.mask, Shape{B, (V + 31) / 32}, "mask");
    c.require(B <= 65535, "token_mask: at most 65535 rows (grid.y)");
  }
  return c;
}

void token_mask_run(const TokenMaskArgs& a, OpContext& ctx) {
  launch_token_mask(a.logits.data<float>(), a.logits.stride(0),
                    reinterpret_cast<const uint32_t*>(a.mask.data<int32_t>()), a.logits.dim(0),
                    a.logits.dim(1), ops::kMaskedLogit, stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(TokenMaskArgs, "cuda", Device::Cuda, token_mask_supports, token_mask_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
