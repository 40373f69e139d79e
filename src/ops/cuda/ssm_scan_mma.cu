// Mamba2 chunked scan (SSD) for bf16 activations on tensor cores (mma.sync m16n8k16, bf16
// operands, f32 accumulation). Same chunking and math as ssm_scan.cu (spec 3.2, "Prefill
// (chunked SSD)"); for chunk c of a sequence, local positions l, s, cum_l = sum_{j<=l} dt_j A:
//   CB[l][s]     = C_l . B_s                                  (Q x N).(N x Q) per (chunk, group)
//   S_loc[p][n]  = sum_s x_s[p] bf16(w_s B_s[n]),  w_s = exp(cum_last - cum_s) dt_s
//                                                             (P x Q).(Q x N) per (chunk, head)
//   Y_off[l][p]  = exp(cum_l) sum_n C_l[n] bf16(S_in[p][n])   (Q x N).(N x P)
//   Y_diag[l][p] = sum_{s<=l} bf16(CB[l][s] exp(cum_l - cum_s) dt_s) x_s[p]   (Q x Q).(Q x P)
//   y_l          = bf16(Y_off[l] + Y_diag[l] + D x_l)
// The operands that are not bf16 already (decay-weighted B, the decayed scores, the carried
// state) are rounded to bf16 once before their product, as vLLM's Triton SSD kernels do
// (tl.dot on the input dtype); CB, the accumulation, the state passing and the final state stay
// f32. Kernels, in stream order: chunk table -> dt/cumsum -> chunk states -> state passing (f32;
// stores the state entering each chunk as bf16, the mma operand) -> outputs (Y_off, C.B, the
// scores, Y_diag and D x fused per (chunk, head); C.B is recomputed per head from the staged C
// and B rows, in the same f32 order a separate C.B kernel used, instead of a round trip of f32
// C.B through memory).
#include <atomic>

#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/ssm_scan_common.cuh"
#include "ops/cuda/ssm_scan_staging.cuh"

namespace strata::cuda {

namespace {

constexpr int kMaxQ = static_cast<int>(kMaxMmaScanChunk);
constexpr int kMaxN = static_cast<int>(kMaxMmaScanState);
// Row padding (bf16 elements) of every shared tile: with rows 16 bytes apart modulo 128, the
// eight rows a fragment load touches fall in distinct banks.
constexpr int kPad = 8;

struct MmaScratch : scan::Chunks {
  float* states = nullptr;  // [nc, Hm, P, N]: the chunk's own contribution S_loc
  bf16* sin = nullptr;      // [nc, Hm, P, N]: the state entering the chunk, rounded to bf16
};

MmaScratch mma_scratch_of(const SsmLaunch& p) {
  MmaScratch s;
  static_cast<scan::Chunks&>(s) = scan::chunks_of(p);
  s.states = p.scratch_f32 + scan::chunks_f32(p);
  s.sin = reinterpret_cast<bf16*>(s.states + s.max_chunks * p.heads * p.head_dim * p.state_size);
  return s;
}

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

// Four 8 x 8 bf16 matrices from shared memory, transposed on the way (ldmatrix .trans): lane i
// gives the address of row i % 8 of matrix i / 8; register j holds matrix j, thread t its
// elements (t / 4, 2 (t % 4) and + 1) of the transposed matrix.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
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

// In place, rows s < len of a [Q][N] tile: tile[s][n] = bf16(w_s tile[s][n]) (16-byte groups).
template <class Scale>
__device__ __forceinline__ void scale_rows(bf16* tile, int ld, int len, int N, Scale scale) {
  const scan::Sweep sw(N / 8);
  for (int s = sw.r0; s < len; s += sw.step) {
    const float w = scale(s);
    uint4* at = reinterpret_cast<uint4*>(tile + s * ld + 8 * sw.v);
    uint4 v = *at;
    uint32_t* u = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 e = *reinterpret_cast<const __nv_bfloat162*>(&u[i]);
      u[i] = mma::pack_bf16(w * __bfloat162float(e.x), w * __bfloat162float(e.y));
    }
    *at = v;
  }
}

// grid (nc, Hm), block 256: the chunk's own state S_loc, computed transposed as
// (N x Q).(Q x P): A[n][s] = bf16(w_s B_s[n]), B[s][p] = x_s[p]. Warp w owns the 16-row tiles
// of n = w, w + 8, ... and all P columns. x and B are staged as they lie ([s][p], [s][n]) by
// 16-byte cp.async copies, B scaled in place, and both read transposed by ldmatrix.
template <int NT>  // P = 8 NT
__global__ void __launch_bounds__(256, 2)
    state_mma_kernel(SsmLaunch p, scan::Chunks ch, float* states) {
  constexpr int P = 8 * NT;
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t c = blockIdx.x, h = blockIdx.y, Hm = p.heads, g = h / (Hm / p.groups);
  const int Q = static_cast<int>(p.chunk_size), N = static_cast<int>(p.state_size);
  const int len = ch.table[3 * c + 2];
  if (len == 0) return;
  const int64_t t0 = ch.table[3 * c + 1];
  const int ldb = N + kPad, ldx = P + kPad;
  bf16* bw = reinterpret_cast<bf16*>(smem);  // [Q][ldb]: bf16(w_s B_s[n]) at [s][n]
  bf16* xs = bw + Q * ldb;                   // [Q][ldx]: x_s[p] at [s][p]
  const float* cum = ch.cum + (c * Hm + h) * Q;
  const float* dtv = ch.dt + (c * Hm + h) * Q;
  const float last = cum[len - 1];
  scan::load_rows_async(bw, ldb, static_cast<const bf16*>(p.B.p), p.B.ld, t0, len, Q, g * N, N);
  scan::load_rows_async(xs, ldx, static_cast<const bf16*>(p.x.p), p.x.ld, t0, len, Q, h * P, P);
  scan::cp_async_commit();
  scan::cp_async_wait_all();
  __syncthreads();
  // bw[s][n] = bf16(w_s B_s[n]), w_s = exp(cum_last - cum_s) dt_s: the decay-weighted B.
  scale_rows(bw, ldb, len, N, [=](int s) { return expf(last - cum[s]) * dtv[s]; });
  __syncthreads();
  const int ksteps = (len + 15) / 16;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const mma::Lane ln(lane);
  float* out = states + (c * Hm + h) * P * N;
  for (int mt = warp; mt < N / 16; mt += static_cast<int>(blockDim.x >> 5)) {
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    for (int ks = 0; ks < ksteps; ++ks) {
      uint32_t a[4];
      load_a_trans(a, bw, ldb, 16 * mt, 16 * ks, lane);  // A[n][s] = bw[s][n]
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        uint32_t b0[2], b1[2];
        load_b2_trans(b0, b1, xs, ldx, 8 * j, 16 * ks, lane);  // B[s][p] = xs[s][p]
        mma::mma_16816(acc[j], a, b0);
        mma::mma_16816(acc[j + 1], a, b1);
      }
    }
    const int n = 16 * mt + ln.grp;  // rows n, n + 8; columns pp, pp + 1
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      out[pp * N + n] = acc[j][0];
      out[(pp + 1) * N + n] = acc[j][1];
      out[pp * N + n + 8] = acc[j][2];
      out[(pp + 1) * N + n + 8] = acc[j][3];
    }
  }
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

// grid (nc, Hm), block 2 Q threads: the outputs of one (chunk, head). Warp w owns rows l in
// [16 w, 16 w + 16) and all P columns: Y_off through C and S_in (bf16 from the state passing),
// then per 16 positions s: C.B of its rows (f32, from the staged C and B rows), the scores
// built straight into A fragments, Y_diag; then D x. The chunk's C and B rows and S_in are
// staged whole, as they lie, by 16-byte cp.async copies (x read transposed by ldmatrix), so
// the block waits on memory once.
template <int NT>  // P = 8 NT
__global__ void __launch_bounds__(256, 2)
    output_mma_kernel(SsmLaunch p, scan::Chunks ch, const bf16* sin) {
  constexpr int P = 8 * NT;
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t c = blockIdx.x, h = blockIdx.y, Hm = p.heads, g = h / (Hm / p.groups);
  const int Q = static_cast<int>(p.chunk_size), N = static_cast<int>(p.state_size);
  const int len = ch.table[3 * c + 2];
  if (len == 0) return;
  const int64_t t0 = ch.table[3 * c + 1];
  const int ldx = P + kPad;
  const int ldn = N + kPad;  // row stride of the [rows][N] tiles
  bf16* xs = reinterpret_cast<bf16*>(smem);             // [Q][ldx]: x_s[p] at [s][p]
  bf16* cs = xs + Q * ldx;                              // [Q][ldn]: the chunk's C rows
  bf16* bs = cs + Q * ldn;                              // [Q][ldn]: its B rows
  bf16* ss = bs + Q * ldn;                              // [P][ldn]: S_in rows
  float* cum = reinterpret_cast<float*>(ss + P * ldn);  // [Q]
  float* dts = cum + Q;                                 // [Q]
  const bf16* Cm = static_cast<const bf16*>(p.C.p);
  const bf16* sg = sin + (c * Hm + h) * P * N;
  scan::load_rows_async(cs, ldn, Cm, p.C.ld, t0, len, Q, g * N, N);
  scan::load_rows_async(bs, ldn, static_cast<const bf16*>(p.B.p), p.B.ld, t0, len, Q, g * N, N);
  scan::load_rows_async(ss, ldn, sg, N, 0, P, P, 0, N);
  // Every read of x precedes the first barrier and every write of y follows the last: out may
  // alias x (other blocks touch other rows or heads).
  scan::load_rows_async(xs, ldx, static_cast<const bf16*>(p.x.p), p.x.ld, t0, len, Q, h * P, P);
  scan::cp_async_commit();
  for (int l = threadIdx.x; l < Q; l += blockDim.x) {
    cum[l] = ch.cum[(c * Hm + h) * Q + l];
    dts[l] = ch.dt[(c * Hm + h) * Q + l];
  }
  const int warp = static_cast<int>(threadIdx.x >> 5), m0 = 16 * warp;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const mma::Lane ln(lane);
  const int la = m0 + ln.grp, lb = la + 8;  // this lane's two rows
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Y_off (before the decay): C_l . S_in[p] over every state column.
  scan::cp_async_wait_all();
  __syncthreads();  // C, B, S_in, x, cum and dt staged
  for (int k0 = 0; k0 < N; k0 += 16) {
    uint32_t a[4];
    mma::load_a(a, cs, ldn, m0, k0, ln);  // A[l][n] = C_l[n]
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      uint32_t b[2];
      mma::load_b(b, ss, ldn, 8 * j, k0, ln);  // B[n][p] = S_in[p][n], stored [p][n]
      mma::mma_16816(acc[j], a, b);
    }
  }
  const float cum_a = cum[la], cum_b = cum[lb];
  const float ea = expf(cum_a), eb = expf(cum_b);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    acc[j][0] *= ea;
    acc[j][1] *= ea;
    acc[j][2] *= eb;
    acc[j][3] *= eb;
  }

  // Y_diag: the s tiles up to the diagonal (and inside the chunk); scores computed into the A
  // fragment directly.
  for (int k0 = 0; k0 <= m0 && k0 < len; k0 += 16) {
    // cbt[jj] = C.B of rows la, lb at positions k0 + 8 jj + 2 tig (+1): A[l][n] = C_l[n],
    // B[n][s] = B_s[n] (stored [s][n]), accumulated over n in order from zero.
    float cbt[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    for (int n = 0; n < N; n += 16) {
      uint32_t ca[4];
      mma::load_a(ca, cs, ldn, m0, n, ln);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t b[2];
        mma::load_b(b, bs, ldn, k0 + 8 * jj, n, ln);
        mma::mma_16816(cbt[jj], ca, b);
      }
    }
    const int s = k0 + 2 * ln.tig;
    uint32_t a[4];
    a[0] = score_pair(make_float2(cbt[0][0], cbt[0][1]), la, s, cum_a, cum, dts, len);
    a[1] = score_pair(make_float2(cbt[0][2], cbt[0][3]), lb, s, cum_b, cum, dts, len);
    a[2] = score_pair(make_float2(cbt[1][0], cbt[1][1]), la, s + 8, cum_a, cum, dts, len);
    a[3] = score_pair(make_float2(cbt[1][2], cbt[1][3]), lb, s + 8, cum_b, cum, dts, len);
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      uint32_t b0[2], b1[2];
      load_b2_trans(b0, b1, xs, ldx, 8 * j, k0, lane);  // B[s][p] = x_s[p], stored [s][p]
      mma::mma_16816(acc[j], a, b0);
      mma::mma_16816(acc[j + 1], a, b1);
    }
  }

  const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h);
  bf16* ym = static_cast<bf16*>(p.out.p);
  const bool pairs = (reinterpret_cast<uintptr_t>(ym) & 3u) == 0 && (p.out.ld & 1) == 0;
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

int state_smem(int Q, int N, int P) {
  return Q * (N + kPad + P + kPad) * static_cast<int>(sizeof(bf16));
}
int output_smem(int Q, int P, int N) {
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

template <int NT>
void launch_mma(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  constexpr int P = 8 * NT;
  static std::atomic<uint64_t> state_attr{0}, output_attr{0};
  allow_smem(state_mma_kernel<NT>, state_smem(kMaxQ, kMaxN, P), state_attr);
  allow_smem(output_mma_kernel<NT>, output_smem(kMaxQ, P, kMaxN), output_attr);
  const MmaScratch sc = mma_scratch_of(p);
  const int Q = static_cast<int>(p.chunk_size), N = static_cast<int>(p.state_size);
  const unsigned nc = static_cast<unsigned>(sc.max_chunks), Hm = static_cast<unsigned>(p.heads);
  scan::launch_chunk_prologue<bf16>(p, sc, index_errors, st);
  if (nc > 0) {
    state_mma_kernel<NT><<<dim3(nc, Hm), 256, state_smem(Q, N, P), st>>>(p, sc, sc.states);
    STRATA_CUDA_LAUNCH_CHECK();
    mark_scan_stage("state_mma");
  }
  scan::launch_state_pass<bf16>(p, sc, sc.states, sc.sin, index_errors, st);
  if (nc > 0) {
    output_mma_kernel<NT><<<dim3(nc, Hm), static_cast<unsigned>(2 * Q), output_smem(Q, P, N),
                            st>>>(p, sc, sc.sin);
    STRATA_CUDA_LAUNCH_CHECK();
    mark_scan_stage("output_mma");
  }
}

}  // namespace

int64_t ssm_scan_mma_scratch_f32(const SsmLaunch& p) {
  const int64_t nc = ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size);
  const int64_t states = nc * p.heads * p.head_dim * p.state_size;
  return scan::chunks_f32(p) + states + (states + 1) / 2;
}

int64_t ssm_scan_mma_scratch_i32(const SsmLaunch& p) {
  return scan::chunks_i32(p);
}

void launch_ssm_scan_mma(const SsmLaunch& p, int* index_errors, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (p.x.dt != DType::BF16) STRATA_CUDA_FAIL("ssm_scan_mma called with a non-bf16 act dtype");
  if (p.head_dim == 64)
    launch_mma<8>(p, index_errors, st);
  else if (p.head_dim == 80)
    launch_mma<10>(p, index_errors, st);
  else
    STRATA_CUDA_FAIL("ssm_scan_mma called with an unsupported head_dim (checked in supports)");
}

}  // namespace strata::cuda
