// Reading a LinearWeight (bf16 | f32 | f16 | f8e4m3) on the host, shared by linear and the MoE
// experts. y[n] = dot(x, row n) * output_scale: for f8e4m3 the row holds the e4m3 values
// exactly and the per-tensor weight_scale is applied once to the f32 dot product (the W8A16
// reference: equal to dequantizing W * weight_scale first, up to one f32 rounding). The static
// input_scale (W8A8 on the device) is ignored on the host by design.
#pragma once

#include <string>

#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {

// Checks a weight form, expected shape [N, K] (N or K < 0: any).
bool weight_supported(ArgCheck& c, const LinearWeight& w, const char* name, int64_t N, int64_t K);

// Row n of the weight as f32 (K values).
inline void load_weight_row(const LinearWeight& w, int64_t n, float* dst) {
  const size_t es = dtype_size(w.weight.dtype());
  load_f32(
      static_cast<const char*>(w.weight.raw()) + static_cast<size_t>(n * w.weight.stride(0)) * es,
      w.weight.dtype(), w.in_features(), dst);
}

inline float weight_output_scale(const LinearWeight& w) {
  return w.weight.dtype() == DType::F8E4M3 ? w.weight_scale : 1.0f;
}

}  // namespace strata::ops::host
