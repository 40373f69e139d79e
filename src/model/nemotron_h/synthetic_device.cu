// The device side of synthetic_plan.h (`--load-format dummy`): each element is computed from
// (seed, index) by the same functions the host uses, so a dummy model on the device holds
// exactly the weights `strata make-checkpoint` writes.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "model/nemotron_h/synthetic_launch.h"
#include "model/nemotron_h/synthetic_rng.h"

namespace strata::model {
namespace {

__device__ float value_of(const SynthLaunch& r, uint64_t i) {
  if (r.kind == 0) return synth_symmetric(r.seed, i, r.k);
  if (r.kind == 1) return synth_uniform(r.seed, i, r.lo, r.span);
  return r.value;
}

__device__ void store(float* out, uint64_t i, float v, float) {
  out[i] = v;
}
__device__ void store(__nv_bfloat16* out, uint64_t i, float v, float) {
  out[i] = __float2bfloat16_rn(v);
}
__device__ void store(__nv_fp8_storage_t* out, uint64_t i, float v, float inv_scale) {
  // __fmul_rn keeps the product a separate rounding (no contraction), as on the host.
  out[i] = __nv_cvt_float_to_fp8(__fmul_rn(v, inv_scale), __NV_SATFINITE, __NV_E4M3);
}

template <class T>
__global__ void fill_kernel(SynthLaunch r, T* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < r.n;
       i += stride)
    store(out, i, value_of(r, i), r.inv_scale);
}

}  // namespace

int launch_synthetic_fill(const SynthLaunch& p, void* stream) {
  if (p.n == 0) return 0;
  const int threads = 256;
  const uint64_t want = (p.n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case 0:
      fill_kernel<<<blocks, threads, 0, s>>>(p, static_cast<float*>(p.out));
      break;
    case 1:
      fill_kernel<<<blocks, threads, 0, s>>>(p, static_cast<__nv_bfloat16*>(p.out));
      break;
    case 2:
      fill_kernel<<<blocks, threads, 0, s>>>(p, static_cast<__nv_fp8_storage_t*>(p.out));
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

const char* synth_launch_error(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace strata::model
