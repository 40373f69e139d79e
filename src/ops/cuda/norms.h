// Launchers of the normalizations: RMSNorm with optional fused residual add, and the Mamba2
// gated grouped RMSNorm.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// residual.p may be null (no residual). All act tensors share one dtype.
void launch_rms_norm(const Mat& x, const Mat& residual, const Vec& weight, float eps,
                     const Mat& out, void* stream);

void launch_gated_rms_norm(const Mat& y, const Mat& z, const Vec& weight, int64_t groups, float eps,
                           const Mat& out, void* stream);

}  // namespace strata::cuda
