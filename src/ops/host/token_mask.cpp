// Host token_mask: disallowed logits to kMaskedLogit from per-row bit words (ops.h TokenMaskArgs).
#include "ops/host/host_common.h"
#include "ops/token_mask_args.h"

namespace strata::ops::host {
namespace {

bool token_mask_supports(const TokenMaskArgs& a, std::string* why) {
  ArgCheck c("token_mask", why);
  if (!(c.host(a.logits, "logits") && c.host(a.mask, "mask"))) return false;
  if (!c.dtype_in(a.logits, "logits", {DType::F32}) || !c.dtype_in(a.mask, "mask", {DType::I32}))
    return false;
  const int64_t B = a.logits.rank() == 2 ? a.logits.dim(0) : -1;
  const int64_t V = a.logits.rank() == 2 ? a.logits.dim(1) : -1;
  return c.rows(a.logits, "logits", B, V) && c.rows(a.mask, "mask", B, (V + 31) / 32) &&
         c.that(a.mask.stride(0) == (V + 31) / 32, "mask is contiguous");
}

void token_mask_run(const TokenMaskArgs& a, OpContext&) {
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1), W = (V + 31) / 32;
  for (int64_t b = 0; b < B; ++b) {
    float* row = a.logits.data<float>() + b * a.logits.stride(0);
    const auto* words = reinterpret_cast<const uint32_t*>(a.mask.data<int32_t>() + b * W);
    for (int64_t v = 0; v < V; ++v)
      if (((words[v / 32] >> (v % 32)) & 1u) == 0) row[v] = kMaskedLogit;
  }
}

}  // namespace

STRATA_REGISTER_KERNEL(TokenMaskArgs, "host", Device::Host, token_mask_supports, token_mask_run);

}  // namespace strata::ops::host
