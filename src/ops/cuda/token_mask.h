// Launcher of token_mask (ops.h TokenMaskArgs): logits[b, v] = `masked` where the bit is clear.
#pragma once

#include <cstdint>

namespace strata::cuda {

void launch_token_mask(float* logits, int64_t row_stride, const uint32_t* mask, int64_t B,
                       int64_t V, float masked, void* stream);

}  // namespace strata::cuda
