// Device helpers shared by the kernels: f32 <-> activation conversions with the rounding the
// host reference uses (round to nearest even), reductions, and the activation functions in the
// form the host computes them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/cuda_check.h"

namespace strata::cuda {

// Runs `set` (kernel attribute opt-ins, which the driver keeps per device) once on each device
// the process launches on; `done` holds one bit per device ordinal.
template <class Fn>
inline void once_per_device(std::atomic<uint64_t>& done, Fn set) {
  int dev = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if (done.load(std::memory_order_acquire) & bit) return;
  set();
  done.fetch_or(bit, std::memory_order_acq_rel);
}

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(bf16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// The "store in the activation dtype" rounding point, kept in f32.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  return to_f32(from_f32<T>(v));
}

// A scalar parameter that may be stored f32 or bf16 (D, dt_bias).
__device__ __forceinline__ float load_param(const void* p, bool is_bf16, int64_t i) {
  return is_bf16 ? __bfloat162float(static_cast<const bf16*>(p)[i])
                 : static_cast<const float*>(p)[i];
}

// e4m3 byte -> f32 (exact), through the hardware fp8x2 -> half2 conversion.
__device__ __forceinline__ float fp8_to_f32(uint8_t v) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), __NV_E4M3);
  return __half2float(__half(h));
}
// f32 -> e4m3 with saturation to +-448 (round to nearest even), as quantizers do.
__device__ __forceinline__ uint8_t f32_to_fp8_sat(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
// `scratch` holds 32 floats of shared memory; the call ends with the block synchronized.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nwarps ? scratch[lane] : 0.f;
  t = warp_sum(t);
  return t;
}

// IEEE-exact forms (no fast-math intrinsics), the same formulas as the host reference.
__device__ __forceinline__ float sigmoidf_(float v) {
  return 1.f / (1.f + expf(-v));
}
__device__ __forceinline__ float siluf_(float v) {
  return v / (1.f + expf(-v));
}
__device__ __forceinline__ float softplusf_(float v) {
  return v > 20.f ? v : log1pf(expf(v));
}

inline unsigned grid_1d(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Calls f(T{}) with T the device type of an activation dtype (f32 or bf16).
template <class F>
void with_act(DType t, F&& f) {
  if (t == DType::F32)
    f(float{});
  else if (t == DType::BF16)
    f(bf16{});
  else
    STRATA_CUDA_FAIL("cuda kernel called with a non-activation dtype (checked in supports)");
}
// Same for any float storage dtype a cast reads or writes (f32, bf16, f16).
template <class F>
void with_float(DType t, F&& f) {
  if (t == DType::F32)
    f(float{});
  else if (t == DType::BF16)
    f(bf16{});
  else if (t == DType::F16)
    f(__half{});
  else
    STRATA_CUDA_FAIL("cuda kernel called with a non-float dtype (checked in supports)");
}

}  // namespace strata::cuda
