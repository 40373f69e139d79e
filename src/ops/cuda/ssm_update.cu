// Selective state update (decode): one token per sequence. A block covers kRowsPerBlock rows p
// of one (sequence, head) state; each warp owns rows, its lanes span the state dimension N with
// float4 loads, so the f32 state (the bulk of the bytes) streams once in and once out.
//   S[p, :] = exp(dt * A) * S[p, :] + (dt * x[p]) * B[g, :]
//   y[p]    = act(S[p, :] . C[g, :] + D * x[p])
#include "ops/cuda/common.cuh"
#include "ops/cuda/pdl.cuh"
#include "ops/cuda/ssm.h"

namespace strata::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;

// NPL = state values per lane (N / 32) known at compile time, vectorized by float4 when NPL % 4
// == 0; NPL = 0 handles any N with a strided scalar loop.
template <class T, int NPL>
__global__ void __launch_bounds__(kWarps * 32) ssm_update_kernel(SsmLaunch p, int* errors) {
  pdl_enter();
  const int64_t Hm = p.heads, P = p.head_dim, N = p.state_size;
  const int64_t b = blockIdx.x / Hm, h = blockIdx.x % Hm;
  const int64_t g = h / (Hm / p.groups);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
  if (slot < 0 || slot >= p.num_slots) {
    if (threadIdx.x == 0 && blockIdx.y == 0) atomicAdd(errors, 1);
    return;
  }
  const bool param_bf16 = p.D.dt == DType::BF16;
  const float dt = softplusf_(to_f32(static_cast<const T*>(p.dt_raw.p)[b * p.dt_raw.ld + h]) +
                              load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h));
  const float dA = expf(dt * p.A[h]);
  const float Dh = load_param(p.D.p, param_bf16, h);
  const T* Bv = static_cast<const T*>(p.B.p) + b * p.B.ld + g * N;
  const T* Cv = static_cast<const T*>(p.C.p) + b * p.C.ld + g * N;
  const T* xv = static_cast<const T*>(p.x.p) + b * p.x.ld + h * P;
  T* yv = static_cast<T*>(p.out.p) + b * p.out.ld + h * P;
  float* S = p.states + (static_cast<int64_t>(slot) * Hm + h) * P * N;

  if constexpr (NPL > 0) {
    // All of this warp's state rows are requested before any is used: one memory round trip.
    constexpr bool kVec = NPL % 4 == 0;
    constexpr int kLoads = kVec ? NPL / 4 : NPL;
    float bl[NPL], cl[NPL], xp[kRowsPerWarp], st[kRowsPerWarp][NPL];
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int64_t n = kVec ? (lane * 4 + (i / 4) * 128 + (i % 4)) : (lane + i * 32);
      bl[i] = to_f32(Bv[n]);
      cl[i] = to_f32(Cv[n]);
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + r * kWarps + warp;
      if (row >= P) break;
      xp[r] = to_f32(xv[row]);
      const float* Sr = S + row * N;
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        if constexpr (kVec) {
          const float4 v = *reinterpret_cast<const float4*>(Sr + q * 128 + lane * 4);
          st[r][4 * q] = v.x;
          st[r][4 * q + 1] = v.y;
          st[r][4 * q + 2] = v.z;
          st[r][4 * q + 3] = v.w;
        } else {
          st[r][q] = Sr[lane + q * 32];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + r * kWarps + warp;
      if (row >= P) break;  // warp-uniform
      const float dx = dt * xp[r];
      float* Sr = S + row * N;
      float y = 0.f;
#pragma unroll
      for (int i = 0; i < NPL; ++i) {
        st[r][i] = dA * st[r][i] + dx * bl[i];
        y += st[r][i] * cl[i];
      }
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        if constexpr (kVec)
          *reinterpret_cast<float4*>(Sr + q * 128 + lane * 4) =
              make_float4(st[r][4 * q], st[r][4 * q + 1], st[r][4 * q + 2], st[r][4 * q + 3]);
        else
          Sr[lane + q * 32] = st[r][q];
      }
      y = warp_sum(y);
      if (lane == 0) yv[row] = from_f32<T>(y + Dh * xp[r]);
    }
  } else {
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + r * kWarps + warp;
      if (row >= P) break;
      const float xp = to_f32(xv[row]);
      const float dx = dt * xp;
      float* Sr = S + row * N;
      float y = 0.f;
      for (int64_t n = lane; n < N; n += 32) {
        const float s = dA * Sr[n] + dx * to_f32(Bv[n]);
        Sr[n] = s;
        y += s * to_f32(Cv[n]);
      }
      y = warp_sum(y);
      if (lane == 0) yv[row] = from_f32<T>(y + Dh * xp);
    }
  }
}

}  // namespace

void launch_ssm_update(const SsmLaunch& p, int* index_errors, void* stream) {
  const int64_t Bn = p.x.rows;
  if (Bn == 0) return;
  dim3 grid(static_cast<unsigned>(Bn * p.heads),
            static_cast<unsigned>((p.head_dim + kRowsPerBlock - 1) / kRowsPerBlock));
  auto s = static_cast<cudaStream_t>(stream);
  with_act(p.x.dt, [&](auto tag) {
    using T = decltype(tag);
    // float4 state rows need N % 4 == 0 (rows then stay 16-byte aligned).
    if (p.state_size == 128)
      launch_pdl(ssm_update_kernel<T, 4>, grid, dim3(kWarps * 32), 0, s, p, index_errors);
    else if (p.state_size == 256)
      launch_pdl(ssm_update_kernel<T, 8>, grid, dim3(kWarps * 32), 0, s, p, index_errors);
    else if (p.state_size == 64)
      launch_pdl(ssm_update_kernel<T, 2>, grid, dim3(kWarps * 32), 0, s, p, index_errors);
    else
      launch_pdl(ssm_update_kernel<T, 0>, grid, dim3(kWarps * 32), 0, s, p, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
