// Launchers of the linear layer y[t, n] = scale * sum_k x[t, k] * W[n, k]: the FP8 GEMV on the
// tensor cores (decode with e4m3 weights), the small-M kernel of our own (decode, any weight
// dtype: memory-bound, 16-byte weight loads), the cuBLASLt GEMM (prefill), and the e4m3
// activation quantizer of the W8A8 path.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

class DeviceContext;  // device_context.h (not included: .cu files include this header)

constexpr int64_t kSmallMMaxRows = 8;  // the small-M kernel's limit on T

// x dtype f32 | bf16 | f8e4m3 (already quantized), W f32 | bf16 | f8e4m3 [N, K] contiguous,
// out f32 | bf16. `scale` multiplies the f32 sum (weight_scale, times input_scale for W8A8).
struct LinearLaunch {
  Mat x;
  const void* w = nullptr;
  DType wt = DType::BF16;
  int64_t n = 0, k = 0;
  float scale = 1.f;
  float input_scale = 0.f;  // FP8 GEMV only: > 0 = W8A8 (bf16 x quantized inside, or e4m3 x)
  Mat out;
};
void launch_linear_small_m(const LinearLaunch& p, void* stream);

// The FP8 GEMV (linear_fp8_gemv.cu): x bf16 [T, K] with 16-byte aligned rows, W e4m3 [N, K]
// 16-byte aligned with K % 16 == 0, out f32 | bf16. W8A8 when input_scale > 0 (T <= 8; x is
// quantized to e4m3 inside, or is e4m3 already with 8-byte aligned rows; scale = weight_scale *
// input_scale), W8A16 otherwise (T <= 16).
// Each block stages the T rows of x in shared memory: fp8_gemv_stage_bytes(T, K, w8a8) must
// not exceed fp8_gemv_max_stage_bytes().
constexpr int64_t kFp8GemvMaxRows = 16;
constexpr int64_t kFp8GemvMaxRowsW8A8 = 8;
int64_t fp8_gemv_stage_bytes(int64_t T, int64_t K, bool w8a8);
int64_t fp8_gemv_max_stage_bytes();
void launch_linear_fp8_gemv(const LinearLaunch& p, void* stream);
// The same product and limits with the weights streamed through shared memory (cp.async,
// linear_fp8_stream.cuh); also 16-byte aligned x rows and weights.
void launch_linear_fp8_stream(const LinearLaunch& p, void* stream);

// out[T, K] (contiguous e4m3 bytes) = sat_e4m3(x / input_scale), x f32 | bf16.
void launch_quantize_fp8(const Mat& x, float input_scale, void* out, void* stream);

// out[T, K] (contiguous f32) = x (bf16 rows): feeds an f32 weight to the f32 GEMM.
void launch_rows_to_f32(const Mat& x, float* out, void* stream);

// cuBLASLt: x bf16 | f32 | f8e4m3 with W of the same dtype, out bf16 | f32, f32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32 for f32). Plans are cached per shape.
// On `stream` (dc's step stream or its side stream), with dc's cuBLASLt state; each of the two
// streams has its own workspace, so the two can run GEMMs at once.
void linear_cublaslt(const LinearLaunch& p, DeviceContext& dc, void* stream);

// The heuristic's other proposals, for bench-kernels' check that its first choice (the one
// linear_cublaslt runs) is within reach of cuBLASLt's best on each shape: how many usable
// algorithms it proposes for `p` (up to 16, best first; number 0 is linear_cublaslt's), and one
// run of `p` with proposal number `algo`.
int linear_cublaslt_survey_size(const LinearLaunch& p, DeviceContext& dc);
void linear_cublaslt_survey_run(const LinearLaunch& p, DeviceContext& dc, void* stream, int algo);

}  // namespace strata::cuda
