// Launchers of the linear layer y[t, n] = scale * sum_k x[t, k] * W[n, k]: the small-M kernel of
// our own (decode: memory-bound, one warp per output feature, 16-byte weight loads), the
// cuBLASLt GEMM (prefill), and the e4m3 activation quantizer of the W8A8 path.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

constexpr int64_t kSmallMMaxRows = 8;  // the small-M kernel's limit on T

// x dtype f32 | bf16 | f8e4m3 (already quantized), W f32 | bf16 | f8e4m3 [N, K] contiguous,
// out f32 | bf16. `scale` multiplies the f32 sum (weight_scale, times input_scale for W8A8).
struct LinearLaunch {
  Mat x;
  const void* w = nullptr;
  DType wt = DType::BF16;
  int64_t n = 0, k = 0;
  float scale = 1.f;
  Mat out;
};
void launch_linear_small_m(const LinearLaunch& p, void* stream);

// out[T, K] (contiguous e4m3 bytes) = sat_e4m3(x / input_scale), x f32 | bf16.
void launch_quantize_fp8(const Mat& x, float input_scale, void* out, void* stream);

// out[T, K] (contiguous f32) = x (bf16 rows): feeds an f32 weight to the f32 GEMM.
void launch_rows_to_f32(const Mat& x, float* out, void* stream);

// cuBLASLt: x bf16 | f32 | f8e4m3 with W of the same dtype, out bf16 | f32, f32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32 for f32). Plans are cached per shape.
void linear_cublaslt(const LinearLaunch& p, void* stream);

}  // namespace strata::cuda
