// Host side of the TMA tile loads (tma_sm90.cuh): the tensor map of a bf16 matrix view, encoded
// through the driver's cuTensorMapEncodeTiled (reached through the runtime, so nothing links
// libcuda directly).
#pragma once

#include <cuda.h>

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// Map of `m` ([rows][cols] bf16, row stride m.ld elements, 16-byte aligned with ld % 8 == 0) in
// boxes of box_rows x 64 columns, written to shared memory in the 128-byte swizzle; rows and
// columns past the view arrive as zeros. Fails (STRATA_CUDA_FAIL) when the driver refuses it.
CUtensorMap tma_map_bf16_sw128(const Mat& m, int box_rows);

}  // namespace strata::cuda
