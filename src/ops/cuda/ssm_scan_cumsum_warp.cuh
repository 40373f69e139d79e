// The chunk's dt / cumsum prologue of the warpgroup scan (ssm_scan_wg.cu's dt_rows_kernel) in one
// warp: the same values as scan::chunk_dt_cumsum (the same Hillis-Steele additions in the same
// order), without its 14 block barriers. The loads and the arithmetic are two calls so a caller
// can put other work between them.
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/ssm.h"

namespace strata::cuda::scan {

namespace {

// Lane j of the calling warp holds positions 4 j .. 4 j + 3 of a 128-position chunk.
struct WarpChunkDt {
  float raw[4];  // dt_raw + dt_bias, loaded (0 past len)
};

__device__ __forceinline__ WarpChunkDt load_chunk_dt_warp(const SsmLaunch& p, int64_t t0, int len,
                                                          int64_t h) {
  WarpChunkDt d;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const bf16* raw = static_cast<const bf16*>(p.dt_raw.p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int l = 4 * lane + i;
    d.raw[i] = l < len ? to_f32(raw[(t0 + l) * p.dt_raw.ld + h]) : 0.f;
  }
  return d;
}

// dts[l] = dt_l (0 past len), cum[l] = inclusive cumsum of dt A, ws[l] = exp(cum[len-1] -
// cum[l]) dt_l, for l < 128, written by the calling warp (the caller synchronizes before any
// other warp reads them).
__device__ __forceinline__ void chunk_cumsum_warp(const SsmLaunch& p, const WarpChunkDt& d, int len,
                                                  int64_t h, float* dts, float* cum, float* ws) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float bias = load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h), A = p.A[h];
  float dt[4], v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dt[i] = 4 * lane + i < len ? softplusf_(d.raw[i] + bias) : 0.f;
    v[i] = dt[i] * A;
  }
  const unsigned all = 0xffffffffu;
  // Hillis-Steele, offsets 1 and 2: within the lane's four positions or from the lane below.
  {
    const float up3 = __shfl_up_sync(all, v[3], 1);
    const float n0 = lane >= 1 ? v[0] + up3 : v[0];
    v[3] = v[3] + v[2];
    v[2] = v[2] + v[1];
    v[1] = v[1] + v[0];
    v[0] = n0;
  }
  {
    const float up2 = __shfl_up_sync(all, v[2], 1), up3 = __shfl_up_sync(all, v[3], 1);
    const float n0 = lane >= 1 ? v[0] + up2 : v[0];
    const float n1 = lane >= 1 ? v[1] + up3 : v[1];
    v[3] = v[3] + v[1];
    v[2] = v[2] + v[0];
    v[1] = n1;
    v[0] = n0;
  }
  // Offsets 4 k (k = 1 .. 16): position l - 4 k is the same slot of lane j - k.
#pragma unroll
  for (int k = 1; k < 32; k <<= 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float up = __shfl_up_sync(all, v[i], k);
      if (lane >= k) v[i] = v[i] + up;
    }
  }
  const int lastl = len - 1, sel = lastl & 3;  // the same for every lane
  const float mine = sel == 0 ? v[0] : sel == 1 ? v[1] : sel == 2 ? v[2] : v[3];
  const float last = __shfl_sync(all, mine, lastl >> 2);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int l = 4 * lane + i;
    dts[l] = dt[i];
    cum[l] = v[i];
    ws[l] = expf(last - v[i]) * dt[i];
  }
}

}  // namespace
}  // namespace strata::cuda::scan
