// Mamba2 chunked scan (SSD) for bf16 activations on tensor cores in one pass: after the chunk
// table, a single kernel with one block per (chunk, head) that stages the chunk's x, B and C
// once, computes dt and the in-chunk cumsum, its own chunk state S_loc, then takes the state
// entering the chunk from its predecessor (a flag in global memory per (chunk, head), set once
// the predecessor has published its outgoing state: the chain of a sequence's chunks is the
// only serial part), publishes S_out = exp(cum_last) S_in + S_loc for its successor (or writes
// it to the sequence's slot after the last chunk), and computes its outputs from the tiles it
// still holds. Nothing but the f32 states passed between neighbouring chunks goes through
// memory (L2-resident at the shapes measured).
//
// Same math and rounding points as ssm_scan_mma.cu (that file's header; the exact-emulation
// cases of tests/ops/cases_ssd_mma_exact.cpp run both kernels): bf16(w_s B_s[n]) is rounded in
// the A fragment instead of in shared memory (the same products), the state passing is the
// same f32 update, S_in is rounded to bf16 once, and the outputs are the same code
// (scan::chunk_outputs).
//
// Forward progress: blocks take their (chunk, head) from an atomic ticket in the order they
// start, chunk-major, and a chunk's predecessor is the chunk before it in the table; so every
// block waits only on a block that is already running (or done), whatever the scheduler does.
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/ssm_scan_chain.cuh"
#include "ops/cuda/ssm_scan_common.cuh"
#include "ops/cuda/ssm_scan_mma_tiles.cuh"
#include "ops/cuda/ssm_scan_staging.cuh"

namespace strata::cuda {

namespace {

constexpr int kMaxQ = static_cast<int>(kMaxMmaScanChunk);
constexpr int kMaxN = static_cast<int>(kMaxMmaScanState);
using scan::kPad;

using scan::clear_empty_sequences;
using scan::discard_l2_line;
using scan::fused_scratch_of;
using scan::FusedScratch;
using scan::load_acquire;
using scan::scale_pair;
using scan::store_release;

// grid nc * Hm (one block per (chunk, head), taken by ticket), block 2 Q threads (Q / 16
// warps). Warp w holds S_loc for the 16-column state tiles n in {w, w + W, ...} (MT of them)
// and all P rows, computed as (N x Q).(Q x P): A[n][s] = bf16(w_s B_s[n]), B[s][p] = x_s[p].
template <int NT, int MT, bool kLookback>  // P = 8 NT; MT = ceil(N / Q) state tiles per warp
__global__ void __launch_bounds__(256, 2)
    fused_scan_kernel(SsmLaunch p, FusedScratch fs, int* errors) {
  constexpr int P = 8 * NT;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int ticket;
  __shared__ int64_t base_chunk;  // the chunk whose inclusive state this block starts from
  if (threadIdx.x == 0) ticket = atomicAdd(fs.ticket, 1);
  __syncthreads();
  const int64_t Hm = p.heads, c = ticket / Hm, h = ticket - c * Hm, g = h / (Hm / p.groups);
  const int Q = static_cast<int>(p.chunk_size), N = static_cast<int>(p.state_size);
  if (c == 0) clear_empty_sequences<8 * NT>(p, fs.ch, h, errors);
  const int len = fs.ch.table[3 * c + 2];
  if (len == 0) return;  // past every sequence: no block waits on it
  const int64_t t0 = fs.ch.table[3 * c + 1];
  const int b = fs.ch.table[3 * c];
  const int32_t first = fs.ch.seq_chunks[2 * b], count = fs.ch.seq_chunks[2 * b + 1];
  const bool is_first = c == first, is_last = c == first + count - 1;
  const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
  const bool slot_ok = slot >= 0 && slot < p.num_slots;
  if (is_first && !slot_ok && h == 0 && threadIdx.x == 0) atomicAdd(errors, 1);

  const int ldx = P + kPad, ldn = N + kPad;
  bf16* xs = reinterpret_cast<bf16*>(smem);             // [Q][ldx]: x_s[p] at [s][p]
  bf16* cs = xs + Q * ldx;                              // [Q][ldn]: the chunk's C rows
  bf16* bs = cs + Q * ldn;                              // [Q][ldn]: its B rows
  bf16* ss = bs + Q * ldn;                              // [P][ldn]: S_in rows (bf16)
  float* cum = reinterpret_cast<float*>(ss + P * ldn);  // [Q]
  float* dts = cum + Q;                                 // [Q]
  float* ws = dts + Q;                                  // [Q]: exp(cum_last - cum_s) dt_s
  scan::load_rows_async(cs, ldn, static_cast<const bf16*>(p.C.p), p.C.ld, t0, len, Q, g * N, N);
  scan::load_rows_async(bs, ldn, static_cast<const bf16*>(p.B.p), p.B.ld, t0, len, Q, g * N, N);
  // Every read of x precedes the first barrier and every write of y follows the last: out may
  // alias x (other blocks touch other rows or heads).
  scan::load_rows_async(xs, ldx, static_cast<const bf16*>(p.x.p), p.x.ld, t0, len, Q, h * P, P);
  scan::cp_async_commit();

  const float last = scan::chunk_dt_cumsum(p, t0, len, h, Q, dts, cum, ws);
  const int l = static_cast<int>(threadIdx.x);
  scan::cp_async_wait_all();
  __syncthreads();  // C, B, x, cum, dt and w staged

  // S_loc, before waiting on the predecessor.
  const int warp = l >> 5, lane = l & 31, warps = static_cast<int>(blockDim.x >> 5);
  const mma::Lane ln(lane);
  const int ksteps = (len + 15) / 16, tiles = N / 16;
  float own[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
      own[i][j][0] = own[i][j][1] = own[i][j][2] = own[i][j][3] = 0.f;
    const int mt = warp + warps * i;
    if (mt >= tiles) continue;
    for (int ks = 0; ks < ksteps; ++ks) {
      uint32_t a[4];
      scan::load_a_trans(a, bs, ldn, 16 * mt, 16 * ks, lane);  // A[n][s] = B_s[n]
      const int s = 16 * ks + 2 * ln.tig;
      const float w0 = ws[s], w1 = ws[s + 1], w8 = ws[s + 8], w9 = ws[s + 9];
      a[0] = scale_pair(a[0], w0, w1);
      a[1] = scale_pair(a[1], w0, w1);
      a[2] = scale_pair(a[2], w8, w9);
      a[3] = scale_pair(a[3], w8, w9);
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        uint32_t b0[2], b1[2];
        scan::load_b2_trans(b0, b1, xs, ldx, 8 * j, 16 * ks, lane);  // B[s][p] = x_s[p]
        mma::mma_16816(own[i][j], a, b0);
        mma::mma_16816(own[i][j + 1], a, b1);
      }
    }
  }

  // The state entering the chunk. A sequence's first chunk starts from the slot's initial state
  // (or zero). A later chunk starts from the inclusive state of an earlier chunk k of its
  // sequence and applies run <- exp(cum_last_j) run + S_loc_j for the chunks j between (the same
  // f32 steps the plain chain takes one per block). Plain chain: k = c - 1, waited for. Look-back
  // (kLookback): the block first publishes its own S_loc and decay (flag 1), then walks back over
  // predecessors that have only published theirs until one has its inclusive state (flag 2);
  // the first chunk of a sequence always publishes flag 2, so the walk stops there at the latest.
  const int64_t PN = static_cast<int64_t>(P) * N;
  const float decay = expf(last);
  const int frag = lane;  // float4 index of this lane's fragment within a (tile, j) group
  if (!is_first) {
    if (kLookback && !is_last) {
      float4* agg = reinterpret_cast<float4*>(fs.aggregate + (c * Hm + h) * PN);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int mt = warp + warps * i;
        if (mt >= tiles) continue;
#pragma unroll
        for (int j = 0; j < NT; ++j)
          __stcg(agg + (mt * NT + j) * 32 + frag,
                 make_float4(own[i][j][0], own[i][j][1], own[i][j][2], own[i][j][3]));
      }
      if (threadIdx.x == 0) __stcg(fs.decays + c * Hm + h, decay);
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) store_release(fs.flags + c * Hm + h, 1);
    }
    if (threadIdx.x == 0) {
      int64_t k = c - 1;
      for (;;) {
        int f;
        while ((f = load_acquire(fs.flags + k * Hm + h)) == 0 || (!kLookback && f != 2))
          __nanosleep(32);
        if (f == 2) break;
        --k;  // flag 1: S_loc and decay of chunk k are published; look further back
      }
      base_chunk = k;
    }
    __syncthreads();
  }
  const int64_t base = is_first ? c : base_chunk;
  const bool from_slot =
      is_first && slot_ok && static_cast<const int32_t*>(p.has_initial.p)[b] != 0;
  float* slot_state = p.states + (static_cast<int64_t>(slot_ok ? slot : 0) * Hm + h) * PN;
  const float4* in = reinterpret_cast<const float4*>(fs.carried + (base * Hm + h) * PN);
  float4* out = reinterpret_cast<float4*>(fs.carried + (c * Hm + h) * PN);
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int mt = warp + warps * i;
    if (mt >= tiles) continue;
    const int n = 16 * mt + ln.grp;  // rows n, n + 8 of the transposed product; columns pp, pp + 1
    float r[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      r[j][0] = r[j][1] = r[j][2] = r[j][3] = 0.f;
      if (!is_first) {
        const float4 v = __ldcg(in + (mt * NT + j) * 32 + frag);
        r[j][0] = v.x;
        r[j][1] = v.y;
        r[j][2] = v.z;
        r[j][3] = v.w;
      } else if (from_slot) {
        r[j][0] = slot_state[pp * N + n];
        r[j][1] = slot_state[(pp + 1) * N + n];
        r[j][2] = slot_state[pp * N + n + 8];
        r[j][3] = slot_state[(pp + 1) * N + n + 8];
      }
    }
    if (kLookback && !is_first) {
      for (int64_t k = base + 1; k < c; ++k) {  // chunks that had only their S_loc published
        const float e = __ldcg(fs.decays + k * Hm + h);
        const float4* agg = reinterpret_cast<const float4*>(fs.aggregate + (k * Hm + h) * PN);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const float4 v = __ldcg(agg + (mt * NT + j) * 32 + frag);
          r[j][0] = e * r[j][0] + v.x;
          r[j][1] = e * r[j][1] + v.y;
          r[j][2] = e * r[j][2] + v.z;
          r[j][3] = e * r[j][3] + v.w;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      ss[pp * ldn + n] = __float2bfloat16_rn(r[j][0]);
      ss[(pp + 1) * ldn + n] = __float2bfloat16_rn(r[j][1]);
      ss[pp * ldn + n + 8] = __float2bfloat16_rn(r[j][2]);
      ss[(pp + 1) * ldn + n + 8] = __float2bfloat16_rn(r[j][3]);
      float o[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o[k] = decay * r[j][k] + own[i][j][k];
      if (!is_last) {
        __stcg(out + (mt * NT + j) * 32 + frag, make_float4(o[0], o[1], o[2], o[3]));
      } else if (slot_ok) {
        slot_state[pp * N + n] = o[0];
        slot_state[(pp + 1) * N + n] = o[1];
        slot_state[pp * N + n + 8] = o[2];
        slot_state[(pp + 1) * N + n + 8] = o[3];
      }
    }
    // Plain chain: this block is the only reader of its predecessor's state, and has used it
    // (the values above depend on the loads): drop those lines from L2 unwritten.
    if (!kLookback && !is_first && (lane & 7) == 0) {
#pragma unroll
      for (int j = 0; j < NT; ++j)
        discard_l2_line(in + (mt * NT + j) * 32 + frag);
    }
  }
  if (!is_last) __threadfence();
  __syncthreads();  // S_in staged; S_out stored
  if (!is_last && threadIdx.x == 0) store_release(fs.flags + c * Hm + h, 2);

  scan::chunk_outputs<NT>(p, scan::ChunkTiles{xs, cs, bs, ss, cum, dts, ldx, ldn}, t0, len, h);
}

int fused_smem(int Q, int P, int N) {
  return scan::output_tiles_smem(Q, P, N) + Q * static_cast<int>(sizeof(float));
}

template <int NT, int MT, bool kLookback>
void launch_fused(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  constexpr int P = 8 * NT;
  static std::atomic<uint64_t> attr{0};
  scan::allow_smem(fused_scan_kernel<NT, MT, kLookback>, fused_smem(kMaxQ, P, kMaxN), attr);
  const FusedScratch fs = fused_scratch_of(p);
  const int Q = static_cast<int>(p.chunk_size), N = static_cast<int>(p.state_size);
  if (!start_one_pass(p, fs, index_errors, st)) return;
  const int64_t nc = fs.ch.max_chunks;
  fused_scan_kernel<NT, MT, kLookback>
      <<<static_cast<unsigned>(nc * p.heads), static_cast<unsigned>(2 * Q), fused_smem(Q, P, N),
         st>>>(p, fs, index_errors);
  STRATA_CUDA_LAUNCH_CHECK();
  mark_scan_stage(kLookback ? "fused (look-back)" : "fused (chain)");
}

template <int NT, bool kLookback>
void launch_fused_nt(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  if (p.state_size <= p.chunk_size)
    launch_fused<NT, 1, kLookback>(p, index_errors, st);
  else
    launch_fused<NT, 2, kLookback>(p, index_errors, st);
}

template <bool kLookback>
void launch_fused_p(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  if (p.head_dim == 64)
    launch_fused_nt<8, kLookback>(p, index_errors, st);
  else if (p.head_dim == 80)
    launch_fused_nt<10, kLookback>(p, index_errors, st);
  else
    STRATA_CUDA_FAIL("ssm_scan_fused called with an unsupported head_dim (checked in supports)");
}

}  // namespace

int64_t ssm_scan_fused_scratch_f32(const SsmLaunch& p) {
  const int64_t per_chunk_head = p.head_dim * p.state_size;
  return ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size) * p.heads *
         (2 * per_chunk_head + 1);
}

int64_t ssm_scan_fused_scratch_i32(const SsmLaunch& p) {
  return scan::chunks_i32(p) + ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size) * p.heads + 1;
}

void launch_ssm_scan_fused(const SsmLaunch& p, bool lookback, int* index_errors, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (p.x.dt != DType::BF16) STRATA_CUDA_FAIL("ssm_scan_fused called with a non-bf16 act dtype");
  if (!ssm_scan_fused_shape(p.chunk_size, p.state_size))
    STRATA_CUDA_FAIL("ssm_scan_fused called with state_size > 2 chunk_size (checked in supports)");
  if (lookback)
    launch_fused_p<true>(p, index_errors, st);
  else
    launch_fused_p<false>(p, index_errors, st);
}

}  // namespace strata::cuda
