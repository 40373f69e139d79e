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
#include "ops/cuda/ssm_scan_mma_tiles.cuh"
#include "ops/cuda/ssm_scan_staging.cuh"

namespace strata::cuda {

namespace {

constexpr int kMaxQ = static_cast<int>(kMaxMmaScanChunk);
constexpr int kMaxN = static_cast<int>(kMaxMmaScanState);
using scan::kPad;

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

using scan::load_a_trans;
using scan::load_b2_trans;

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

// grid (nc, Hm), block 2 Q threads: the outputs of one (chunk, head). Each warp owns 16 rows
// l (scan::output_row_tile) and all P columns: Y_off through C and S_in (bf16 from the state
// passing), then per 16 positions s: C.B of its rows (f32, from the staged C and B rows), the
// scores built straight into A fragments, Y_diag; then D x. The chunk's C and B rows and S_in are
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
  const int ldn = N + kPad;                             // row stride of the [rows][N] tiles
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
  scan::cp_async_wait_all();
  __syncthreads();  // C, B, S_in, x, cum and dt staged
  scan::chunk_outputs<NT>(p, scan::ChunkTiles{xs, cs, bs, ss, cum, dts, ldx, ldn}, t0, len, h);
}

int state_smem(int Q, int N, int P) {
  return Q * (N + kPad + P + kPad) * static_cast<int>(sizeof(bf16));
}
int output_smem(int Q, int P, int N) {
  return scan::output_tiles_smem(Q, P, N);
}

template <int NT>
void launch_mma(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  constexpr int P = 8 * NT;
  static std::atomic<uint64_t> state_attr{0}, output_attr{0};
  scan::allow_smem(state_mma_kernel<NT>, state_smem(kMaxQ, kMaxN, P), state_attr);
  scan::allow_smem(output_mma_kernel<NT>, output_smem(kMaxQ, P, kMaxN), output_attr);
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
    output_mma_kernel<NT>
        <<<dim3(nc, Hm), static_cast<unsigned>(2 * Q), output_smem(Q, P, N), st>>>(p, sc, sc.sin);
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
