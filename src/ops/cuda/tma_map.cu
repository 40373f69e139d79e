// cuTensorMapEncodeTiled for the TMA loads (tma_map.h).
#include "ops/cuda/tma_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <mutex>

#include "ops/cuda/cuda_check.h"

namespace strata::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  });
  return fn;
}

}  // namespace

CUtensorMap tma_map_bf16_sw128(const Mat& m, int box_rows) {
  const auto fn = encode_fn();
  if (fn == nullptr) STRATA_CUDA_FAIL("the driver has no cuTensorMapEncodeTiled");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(m.rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.ld) * 2};  // bytes, of dim 1
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t steps[2] = {1, 1};
  const CUresult r = fn(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, m.p, dims, strides, box, steps,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    char what[160];
    std::snprintf(what, sizeof what,
                  "cuTensorMapEncodeTiled refused a %lld x %lld (ld %lld) bf16 "
                  "view: CUresult %d",
                  static_cast<long long>(m.rows), static_cast<long long>(m.cols),
                  static_cast<long long>(m.ld), static_cast<int>(r));
    STRATA_CUDA_FAIL(what);
  }
  return map;
}

}  // namespace strata::cuda
