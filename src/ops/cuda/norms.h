// Launchers of the normalizations: RMSNorm with optional fused residual add, and the Mamba2
// gated grouped RMSNorm.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// x2.p (a second addend of x) and residual.p may be null. All act tensors share one dtype.
// q: the optional e4m3 copy of the output (q.p null = none); out.p may be null when q is given.
void launch_rms_norm(const Mat& x, const Mat& x2, const Mat& residual, const Vec& weight, float eps,
                     const Mat& out, const QuantOut& q, void* stream);

void launch_gated_rms_norm(const Mat& y, const Mat& z, const Vec& weight, int64_t groups, float eps,
                           const Mat& out, const QuantOut& q, void* stream);

// The gated norm with one warp per (row, group) (`cuda.warp`): 16-byte aligned rows and groups
// of at most 32 x kWarpMaxChunksPerLane 16-byte chunks (Nano-3: 512 bf16 values = 64 chunks).
// From warp_form_min_rows() rows (kernel_support.h).
constexpr int64_t kWarpMaxChunksPerLane = 8;
bool gated_rms_norm_warp_fits(const Mat& y, const Mat& z, const Vec& weight, int64_t groups,
                              const Mat& out, const QuantOut& q);
void launch_gated_rms_norm_warp(const Mat& y, const Mat& z, const Vec& weight, int64_t groups,
                                float eps, const Mat& out, const QuantOut& q, void* stream);

}  // namespace strata::cuda
