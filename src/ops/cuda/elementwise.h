// Launchers of the elementwise ops (relu2, add, cast). Arguments are checked by the callers.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// out.p null: only q (the e4m3 copy, ops::QuantizedOut) is written; q.p null: only out.
void launch_relu2(const Mat& x, const Mat& out, const QuantOut& q, void* stream);  // same dtype
void launch_add(const Mat& a, const Mat& b, const Mat& out, void* stream);  // same dtype
void launch_cast(const Vec& x, const Vec& out, void* stream);               // float dtypes

}  // namespace strata::cuda
