// Out-of-line messages for cuda_check.h.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/cuda_check.h"

#include "core/check.h"

namespace strata::cuda::detail {

namespace {
const char* basename_of(const char* file) {
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}
}  // namespace

void cuda_failed(cudaError_t e, const char* expr, const char* file, int line) {
  // A sticky error (illegal address, launch failure) poisons the context: every later call
  // fails too, so say which kind this is.
  throw Error(fmt::format("CUDA error {} ({}): {} at {}:{}", cudaGetErrorName(e),
                          cudaGetErrorString(e), expr, basename_of(file), line));
}

void cublas_failed(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw Error(fmt::format("cuBLASLt error {} ({}): {} at {}:{}", static_cast<int>(s),
                          cublasLtGetStatusString(s), expr, basename_of(file), line));
}

void fail_plain(const char* what, const char* file, int line) {
  throw Error(fmt::format("{} ({}:{})", what, basename_of(file), line));
}

}  // namespace strata::cuda::detail
#endif  // STRATA_HAVE_CUDA
