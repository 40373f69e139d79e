// Error checks for the CUDA runtime and cuBLASLt. Every failing call throws strata::Error naming
// the call, the error and the source site. Usable from .cu and .cpp files alike: the message is
// built out of line (cuda_check.cpp), so device sources need no fmt.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace strata::cuda::detail {
[[noreturn]] void cuda_failed(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void cublas_failed(cublasStatus_t s, const char* expr, const char* file, int line);
// For host code in .cu files, which cannot format messages (fmt's compile-time checks do not
// build under nvcc): throws strata::Error(what).
[[noreturn]] void fail_plain(const char* what, const char* file, int line);
}  // namespace strata::cuda::detail

#define STRATA_CUDA_CHECK(expr)                                                       \
  do {                                                                                \
    const cudaError_t strata_cuda_e_ = (expr);                                        \
    if (strata_cuda_e_ != cudaSuccess)                                                \
      ::strata::cuda::detail::cuda_failed(strata_cuda_e_, #expr, __FILE__, __LINE__); \
  } while (0)

#define STRATA_CUBLAS_CHECK(expr)                                                         \
  do {                                                                                    \
    const cublasStatus_t strata_cublas_s_ = (expr);                                       \
    if (strata_cublas_s_ != CUBLAS_STATUS_SUCCESS)                                        \
      ::strata::cuda::detail::cublas_failed(strata_cublas_s_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next synchronizing call, which is checked too).
#define STRATA_CUDA_LAUNCH_CHECK() STRATA_CUDA_CHECK(cudaGetLastError())

#define STRATA_CUDA_FAIL(what) ::strata::cuda::detail::fail_plain(what, __FILE__, __LINE__)
