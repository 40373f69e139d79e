// Tile-level pieces of the bf16 tensor-core scans (ssm_scan_mma.cu: separate chunk-state, state
// passing and output kernels; ssm_scan_fused.cu: one kernel per (chunk, head) with the state
// passing chained between chunks): ldmatrix loads of transposed tiles, the decayed scores and
// the outputs of one (chunk, head) from its staged tiles. Math: ssm_scan_mma.cu's header.
#pragma once

#include <atomic>

#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/ssm.h"

namespace strata::cuda::scan {

namespace {

// Row padding (bf16 elements) of every shared tile: with rows 16 bytes apart modulo 128, the
// eight rows a fragment load touches fall in distinct banks.
constexpr int kPad = 8;

// Two adjacent outputs of one row (columns pp, pp + 1) rounded to bf16: one 4-byte store when
// the row allows it (`pairs`: the view is 4-byte aligned with an even stride).
__device__ __forceinline__ void store_y_pair(bf16* at, bool pairs, float v0, float v1) {
  if (pairs) {
    *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(v0, v1);
  } else {
    at[0] = __float2bfloat16_rn(v0);
    at[1] = __float2bfloat16_rn(v1);
  }
}

using mma::ldsm_x4;
using mma::ldsm_x4_trans;

// A fragment of rows [m0, m0 + 16), k [k0, k0 + 16) of a tile stored [m][k] (rows 16-byte
// aligned): the values of mma::load_a, by one ldmatrix. Matrices (m0.., k0..),
// (m0 + 8.., k0..), (m0.., k0 + 8..), (m0 + 8.., k0 + 8..).
__device__ __forceinline__ void load_a_rows(uint32_t (&a)[4], const bf16* tile, int ld, int m0,
                                            int k0, int lane) {
  const int j = lane >> 3, i = lane & 7;
  ldsm_x4(a, tile + (m0 + ((j & 1) << 3) + i) * ld + k0 + ((j >> 1) << 3));
}

// B fragments of two n8 tiles (n0.., n0 + 8..) over k [k0, k0 + 16) of a tile stored [n][k]
// (rows 16-byte aligned): the values of two mma::load_b, by one ldmatrix. Matrices
// (n0.., k0..), (n0.., k0 + 8..), (n0 + 8.., k0..), (n0 + 8.., k0 + 8..).
__device__ __forceinline__ void load_b2_rows(uint32_t (&b0)[2], uint32_t (&b1)[2], const bf16* tile,
                                             int ld, int n0, int k0, int lane) {
  const int j = lane >> 3, i = lane & 7;
  uint32_t r[4];
  ldsm_x4(r, tile + (n0 + ((j >> 1) << 3) + i) * ld + k0 + ((j & 1) << 3));
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

// The 16-row tile of a chunk's outputs that warp w of W takes. Row tile r has r + 1 causal
// tiles of C.B and Y_diag; warps w and w + 4 share a sub-partition (and its tensor cores) when
// W = 8, so the second half of the warps takes the row tiles in reverse: warps w and w + W / 2
// hold tiles w and W - 1 - w, and every sub-partition gets the same causal work (9 tiles of s
// at Q = 128, where in order the last one got 12 and the first 6). Rows and their arithmetic
// are unchanged; only which warp computes them.
__device__ __forceinline__ int output_row_tile(int w, int W) {
  const int half = W / 2;
  return w < half ? w : W - 1 - (w - half);
}

// A fragment (mma_bf16.cuh layout) of A[m][k] = tile[k][m], m in [m0, m0 + 16), k in
// [k0, k0 + 16), from a tile stored [k][m] (row stride ld, rows 16-byte aligned): matrices
// (m0.., k0..), (m0 + 8.., k0..), (m0.., k0 + 8..), (m0 + 8.., k0 + 8..).
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const bf16* tile, int ld, int m0,
                                             int k0, int lane) {
  const int j = lane >> 3, i = lane & 7;
  ldsm_x4_trans(a, tile + (k0 + ((j >> 1) << 3) + i) * ld + m0 + ((j & 1) << 3));
}

// B fragments of two n8 tiles (n0.., n0 + 8..) over k [k0, k0 + 16) of B[k][n] = tile[k][n]
// stored [k][n]: b0[0], b0[1] of tile n0, then b1[0], b1[1] of tile n0 + 8.
__device__ __forceinline__ void load_b2_trans(uint32_t (&b0)[2], uint32_t (&b1)[2],
                                              const bf16* tile, int ld, int n0, int k0, int lane) {
  uint32_t r[4];
  ldsm_x4_trans(r, tile + (k0 + (lane & 15)) * ld + n0 + ((lane >> 4) << 3));
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

// Two adjacent scores of row l (positions s, s + 1; cbv = CB[l][s], CB[l][s + 1]) rounded into
// one A register: bf16(CB[l][s] exp(cum_l - cum_s) dt_s), 0 above the diagonal and on rows past
// the chunk. __expf errs by ~2^-21 relative for the |exponents| that leave a normal result, far
// below the bf16 rounding that follows.
__device__ __forceinline__ uint32_t score_pair(float2 cbv, int l, int s, float cum_l,
                                               const float* cum, const float* dts, int len) {
  float v0 = 0.f, v1 = 0.f;
  if (l < len && s <= l) {
    v0 = cbv.x * __expf(cum_l - cum[s]) * dts[s];
    if (s + 1 <= l) v1 = cbv.y * __expf(cum_l - cum[s + 1]) * dts[s + 1];
  }
  return mma::pack_bf16(v0, v1);
}

// The staged shared tiles of one (chunk, head), row strides in bf16 elements.
struct ChunkTiles {
  const bf16* xs;    // [Q][ldx]: x_s[p] at [s][p]
  const bf16* cs;    // [Q][ldn]: the chunk's C rows
  const bf16* bs;    // [Q][ldn]: its B rows (unscaled)
  const bf16* ss;    // [P][ldn]: the state entering the chunk, bf16
  const float* cum;  // [Q]: the in-chunk cumsum of dt A
  const float* dts;  // [Q]: dt, 0 past the chunk
  int ldx, ldn;
};

// The outputs of one (chunk, head) from its staged tiles (the caller has waited for them and
// synchronized the block). Warp w owns rows l in [16 r, 16 r + 16), r = output_row_tile(w), and
// all P columns: Y_off through C and S_in, then per 16 positions s: C.B of its rows (f32, from
// the staged C and B rows), the scores built straight into A fragments, Y_diag; then D x; y
// stored as bf16. Every fragment is read by ldmatrix.
template <int NT>  // P = 8 NT
__device__ __forceinline__ void chunk_outputs(const SsmLaunch& p, const ChunkTiles& t, int64_t t0,
                                              int len, int64_t h) {
  constexpr int P = 8 * NT;
  const int N = static_cast<int>(p.state_size);
  const int warp = static_cast<int>(threadIdx.x >> 5), warps = static_cast<int>(blockDim.x >> 5);
  const int m0 = 16 * output_row_tile(warp, warps);
  const int lane = static_cast<int>(threadIdx.x & 31);
  const mma::Lane ln(lane);
  const int la = m0 + ln.grp, lb = la + 8;  // this lane's two rows
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Y_off (before the decay): C_l . S_in[p] over every state column.
  for (int k0 = 0; k0 < N; k0 += 16) {
    uint32_t a[4];
    load_a_rows(a, t.cs, t.ldn, m0, k0, lane);  // A[l][n] = C_l[n]
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      uint32_t b0[2], b1[2];
      load_b2_rows(b0, b1, t.ss, t.ldn, 8 * j, k0, lane);  // B[n][p] = S_in[p][n], as [p][n]
      mma::mma_16816(acc[j], a, b0);
      mma::mma_16816(acc[j + 1], a, b1);
    }
  }
  const float cum_a = t.cum[la], cum_b = t.cum[lb];
  const float ea = expf(cum_a), eb = expf(cum_b);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    acc[j][0] *= ea;
    acc[j][1] *= ea;
    acc[j][2] *= eb;
    acc[j][3] *= eb;
  }

  // Y_diag of one s tile from its C.B values (cb[jj]: positions k0 + 8 jj + 2 tig, +1): the
  // scores built straight into the A fragment, then the product with x.
  auto diag_tile = [&](const float(&cb)[2][4], int k0) {
    const int s = k0 + 2 * ln.tig;
    uint32_t a[4];
    a[0] = score_pair(make_float2(cb[0][0], cb[0][1]), la, s, cum_a, t.cum, t.dts, len);
    a[1] = score_pair(make_float2(cb[0][2], cb[0][3]), lb, s, cum_b, t.cum, t.dts, len);
    a[2] = score_pair(make_float2(cb[1][0], cb[1][1]), la, s + 8, cum_a, t.cum, t.dts, len);
    a[3] = score_pair(make_float2(cb[1][2], cb[1][3]), lb, s + 8, cum_b, t.cum, t.dts, len);
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      uint32_t b0[2], b1[2];
      load_b2_trans(b0, b1, t.xs, t.ldx, 8 * j, k0, lane);  // B[s][p] = x_s[p], stored [s][p]
      mma::mma_16816(acc[j], a, b0);
      mma::mma_16816(acc[j + 1], a, b1);
    }
  };
  // Y_diag: the s tiles up to the diagonal (k0 <= m0) and inside the chunk, two at a time: their
  // C.B are then independent mma chains over n (each element still summed over n in order from
  // zero, so the same values), the C fragment loaded once for both, and the tiles' scores and
  // products taken in the same order as one at a time.
  const int kend = min(m0 + 16, len);
  for (int k0 = 0; k0 < kend;) {
    const bool two = k0 + 16 < kend;
    // cbt[i][jj] = C.B of rows la, lb at positions k0 + 16 i + 8 jj + 2 tig (+1): A[l][n] =
    // C_l[n], B[n][s] = B_s[n] (stored [s][n]).
    float cbt[2][2][4] = {};
    for (int n = 0; n < N; n += 16) {
      uint32_t ca[4], b0[2], b1[2];
      load_a_rows(ca, t.cs, t.ldn, m0, n, lane);
      load_b2_rows(b0, b1, t.bs, t.ldn, k0, n, lane);  // positions k0.., k0 + 8..
      mma::mma_16816(cbt[0][0], ca, b0);
      mma::mma_16816(cbt[0][1], ca, b1);
      if (two) {
        uint32_t b2[2], b3[2];
        load_b2_rows(b2, b3, t.bs, t.ldn, k0 + 16, n, lane);
        mma::mma_16816(cbt[1][0], ca, b2);
        mma::mma_16816(cbt[1][1], ca, b3);
      }
    }
    diag_tile(cbt[0], k0);
    if (two) diag_tile(cbt[1], k0 + 16);
    k0 += two ? 32 : 16;
  }

  const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h);
  bf16* ym = static_cast<bf16*>(p.out.p);
  const bool pairs = (reinterpret_cast<uintptr_t>(ym) & 3u) == 0 && (p.out.ld & 1) == 0;
  const bf16* xs = t.xs;
  const int ldx = t.ldx;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int pp = 8 * j + 2 * ln.tig;
    if (la < len)
      store_y_pair(ym + (t0 + la) * p.out.ld + h * P + pp, pairs,
                   acc[j][0] + Dh * __bfloat162float(xs[la * ldx + pp]),
                   acc[j][1] + Dh * __bfloat162float(xs[la * ldx + pp + 1]));
    if (lb < len)
      store_y_pair(ym + (t0 + lb) * p.out.ld + h * P + pp, pairs,
                   acc[j][2] + Dh * __bfloat162float(xs[lb * ldx + pp]),
                   acc[j][3] + Dh * __bfloat162float(xs[lb * ldx + pp + 1]));
  }
}

// Bytes of the outputs' staged tiles (x, C, B, S_in, cum, dt) and what a kernel adds after them.
inline int output_tiles_smem(int Q, int P, int N) {
  return (Q * (P + kPad) + (2 * Q + P) * (N + kPad)) * static_cast<int>(sizeof(bf16)) +
         2 * Q * static_cast<int>(sizeof(float));
}

// Raises a kernel's dynamic shared-memory limit to what the largest supported shape needs,
// once per device (bit d of `done`): the call synchronizes with the device, so it is made at
// the first launch (never inside a graph capture: every capturing caller warms up first).
template <class K>
void allow_smem(K kernel, int bytes, std::atomic<uint64_t>& done) {
  once_per_device(done, [&] {
    STRATA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  });
}

}  // namespace
}  // namespace strata::cuda::scan
