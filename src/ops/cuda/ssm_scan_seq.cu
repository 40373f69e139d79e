// Mamba2 chunked scan (SSD) for bf16 activations, one block per (sequence, head) walking the
// sequence's chunks in order with the state in registers (sm_90a wgmma, TMA). Why: the chain of
// ssm_scan_wg.cu (a block per (chunk, head), the state handed on through L2 and a flag) spends
// most of each ~25K-cycle block waiting: staging its tiles, its predecessor, the hand-over
// (docs/BENCHMARKS.md, "eighth session"). Here the tiles of a block's next chunk (C and B by
// TMA, the dt rows by a bulk copy, x by 16-byte copies) land in a second stage while it
// computes the current one, and no block polls another.
//
// Head_dim 80 (9B-v2) only: head_dim 64 (Nano-3) takes ssm_scan_ws.cu, this kernel's products
// with the warpgroups split by role and a cluster of blocks per (sequence, head), which did not
// fit beside head_dim 80's stages (docs/BENCHMARKS.md, "fourteenth session").
//
// Per chunk, warpgroup q (rows n and l in [64 q, +64)), with the products of ssm_scan_wg.cu:
//   S_loc^T = (B w)^T . x and C.B of the first 64 positions issued; the state entering the chunk
//   (registers, or received) written to ss in bf16; Y_off = C . S_in^T;
//   S_out = exp(cum_last) S_in + S_loc (f32) kept;
//   Y = exp(cum_l) Y_off + Y_diag (wgscan::y_diag), y stored (wgscan::store_y).
// Measured (docs/BENCHMARKS.md, "tenth session"): with the scores formed branch-free and the
// block-0 scores and the diagonal C.B beside Y_off, 14-18% faster than ssm_scan_wg.cu's chain for
// one sequence of 512-4,096 tokens (54.7 vs 63.8 us at nano3 1x2048), 15-19% slower for 16
// sequences of 128 tokens (one chunk each: nothing to pipeline, one block per SM); cuda.ssd_wg
// defers to it by ssm_scan_seq_preferred (ssm.h). A chunk still takes ~9K cycles at one block
// per SM, ~1.7K instructions per warp of which the tensor products are a small part.
// Where every block starts at once, the first two chunks' loads and the slot's state are
// issued before pdl_wait, while the table / dt rows kernel runs (pdl.cuh's second exception;
// docs/BENCHMARKS.md, "twelfth session": 1-5% on one-sequence prompts).
// STRATA_SSD_TRACE=1 prints each phase's cycles per chunk (eager calls).
// Same math and rounding points as ssm_scan_wg.cu (its header): the exact-emulation cases of
// tests/ops/cases_ssd_mma_exact.cpp run this kernel too. Shapes: chunk 128, state 128, head_dim
// 80, x, B and C views 16-byte aligned (ssm_scan_wg_shape, in supports).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <vector>

#include "ops/cuda/ssm_scan_wg_tiles.cuh"
#include "ops/cuda/tma_map.h"

namespace strata::cuda {

namespace {

using namespace wgscan;
using scan::fused_scratch_of;
using scan::FusedScratch;

// Shared memory: two stages of {C [2][Q][64] swizzled, B the same, x [Q][P] cores, the dt rows
// cum / dt / w [3][Q] f32}, each rounded up to 1 KB (the next stage's atoms stay 1024-byte
// aligned), then ss [P][N] cores (bf16 S_in, the B operand of Y_off). + 1 KB: the atoms start
// 1024-byte aligned. P = 80: 193 KB.
__host__ __device__ constexpr int seq_smem(int P) { return 2 * stage_bytes(P) + P * kN * 2 + 1024; }
constexpr int kMaxSmem = 227 * 1024;  // sm_90's opt-in limit per block
constexpr int kPhases = 10;           // diagnostic trace entries per warpgroup

// grid S * Hm (a block per (sequence b, head h)), block kThreads, seq_smem(P) bytes.
template <int NT>  // P = 8 NT
__global__ void __launch_bounds__(kThreads, 1)
    seq_scan_kernel(SsmLaunch p, FusedScratch fs, int* errors, long long* trace,
                    const __grid_constant__ CUtensorMap tm_c,
                    const __grid_constant__ CUtensorMap tm_b, int early_rows) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Launched as a programmatic dependent of the table / dt rows kernel (start_wg_scan). On early
  // steps (early_rows) that kernel lets it be scheduled only once every kernel before that one
  // has completed: so the block may read what those wrote (x, B, C, cu_seqlens, the slot's
  // state) before pdl_wait, and starts its first two chunks' loads while the table / dt rows
  // kernel runs; the table and the dt rows, which that kernel writes, are read after pdl_wait
  // only (pdl.cuh's second exception). On the other steps nothing but D (a weight: pdl.cuh's
  // first exception) is read before pdl_wait.
  pdl_trigger();
  constexpr int P = 8 * NT, R = 4 * NT;  // R: accumulator registers of a 64 x P product
  constexpr int kStageBytes = stage_bytes(P);
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ uint64_t full[2];  // mbarriers of the two stages' bulk loads
  const int64_t Hm = p.heads, unit = blockIdx.x;
  const int64_t b = unit / Hm, h = unit - b * Hm, g = h / (Hm / p.groups);
  const int l = static_cast<int>(threadIdx.x);
  const int q = __shfl_sync(0xffffffffu, l >> 7, 0);  // warpgroup (warp-uniform)
  const int warp = (l >> 5) & 3, lane = l & 31;       // its warp, lane
  const mma::Lane ln(lane);
  const int l0 = 64 * q;
  const int la = l0 + 16 * warp + ln.grp, lb = la + 8;  // this thread's two output rows
  const int n = 64 * q + 16 * warp + ln.grp;            // its state rows n, n + 8 of S^T

  unsigned char* smem = smem_raw + ((1024u - (tma::smem_u32(smem_raw) & 1023u)) & 1023u);
  const auto cs_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * kStageBytes); };
  const auto bs_of = [&](int st) { return cs_of(st) + kQ * kN; };
  const auto xs_of = [&](int st) { return cs_of(st) + 2 * kQ * kN; };
  const auto dt_of = [&](int st) { return reinterpret_cast<float*>(xs_of(st) + kQ * P); };
  bf16* ss = reinterpret_cast<bf16*>(smem + 2 * kStageBytes);  // [P][N] cores
  const int32_t* table = fs.ch.table;                          // [nc][seq, t0, len]

  if (l == 0) {
    tma::bar_init(&full[0]);
    tma::bar_init(&full[1]);
  }
  __syncthreads();

  // The sequence's first chunk row and chunk count. For up to kTableSeqs sequences (the table /
  // dt rows kernel's steps) formed here from cu_seqlens as that kernel forms them
  // (block_seq_chunks), so the first loads need not wait for it; else read from its table after
  // pdl_wait.
  const bool early = early_rows != 0;
  int32_t first = 0, count = 0, seq_start = 0, seq_len = 0;
  if (early) {
    const BlockSeq s = block_seq_chunks(p, fs.ch.max_chunks, lane, b);
    first = s.first;
    count = s.count;
    seq_start = s.start;
    seq_len = s.len;
  }

  // The sequence's chunk i into stage i & 1: C, B and the dt
  // rows by one thread on the stage's mbarrier, x by every thread's 16-byte copies (one commit
  // group per chunk, empty past the last, so the waits below count groups uniformly). Every
  // read of x precedes the stores of its chunk's y: out may alias x (other blocks touch other
  // heads or chunks). `with_dt` false: the dt rows are loaded later (load_dt below).
  const auto issue = [&](int i, int64_t t0, int len, bool with_dt) {
    const int k = i;
    if (k < count) {
      const int64_t c = first + k;
      const int st = i & 1;
      if (l == 0) {
        load_chunk_cb(cs_of(st), bs_of(st), g, t0, &tm_c, &tm_b, &full[st]);
        if (with_dt) load_chunk_dt(dt_of(st), fs, c, h, Hm, &full[st]);
      }
      stage_core<P>(xs_of(st), static_cast<const bf16*>(p.x.p), p.x.ld, t0, len, h * P);
    }
    scan::cp_async_commit();
  };
  const auto load_dt = [&](int i) {
    const int k = i;
    if (k < count && l == 0) load_chunk_dt(dt_of(i & 1), fs, first + k, h, Hm, &full[i & 1]);
  };
  // The rows of the block's chunks 0 and 1 as the table holds them (start + k Q, the rest of
  // the sequence up to Q).
  const auto early_row = [&](int i, int32_t& t0, int32_t& len) {
    const int k = i;
    t0 = seq_start + k * kQ;
    len = min(kQ, seq_len - k * kQ);
  };
  int32_t t0_cur = 0, t0_next = 0, len_cur = 0, len_next = 0;
  if (early) {
    early_row(0, t0_cur, len_cur);
    early_row(1, t0_next, len_next);
    issue(0, t0_cur, len_cur, false);
    issue(1, t0_next, len_next, false);
  }
  // The sequence's slot and the state entering it (the slot's, or zero), in the accumulator
  // layout of S_loc^T: s_in[4 j + 0, 1] = S[p = 8 j + 2 tig, +1][n], s_in[4 j + 2, 3] = the same
  // at n + 8. Read before pdl_wait on early steps only: on the others the kernels before this one
  // (start_one_pass) may still be writing them.
  const int64_t PN = static_cast<int64_t>(P) * kN;
  int32_t has_initial = 0;
  bool slot_ok = false, from_slot = false;
  float* slot_state = p.states;
  const auto read_slot = [&] {
    const SeqSlot s = read_seq_slot(p, b, h, PN);
    has_initial = s.has_initial;
    slot_ok = s.ok;
    slot_state = s.state;
    from_slot = slot_ok && has_initial != 0;
  };
  float s_in[R];
  const auto load_initial = [&] {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      s_in[4 * j + 0] = s_in[4 * j + 1] = s_in[4 * j + 2] = s_in[4 * j + 3] = 0.f;
      if (from_slot) load_state_quad(s_in + 4 * j, slot_state, pp, n);
    }
  };
  if (early) {
    read_slot();
    load_initial();
  }
  const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h);  // used by the y store

  pdl_wait();  // the table / dt rows kernel has completed: its table and rows are visible
  if (!early) {
    first = fs.ch.seq_chunks[2 * b];
    count = __shfl_sync(0xffffffffu, fs.ch.seq_chunks[2 * b + 1], 0);
    read_slot();
  }
  if (!slot_ok && h == 0 && l == 0) atomicAdd(errors, 1);
  if (count == 0) {  // no tokens (or offsets the chunk table refused): what the state pass does
    if (slot_ok && has_initial == 0)
      for (int64_t e = l; e < PN; e += kThreads)
        slot_state[e] = 0.f;
    return;
  }
  // The chunk table rows of the block's chunks i and i + 1 (t0, len), read a chunk ahead of
  // their use (a table read at a chunk's start or at its copies' issue waited one memory latency
  // each time), kept as the table's int32 (a conversion to int64 right after the load waited for
  // it: ncu).
  const auto row_of = [&](int i, int32_t& t0, int32_t& len) {
    const int k = i;
    const int64_t c = first + (k < count ? k : 0);
    t0 = table[3 * c + 1];
    len = table[3 * c + 2];
  };
  if (early) {
    load_dt(0);
    load_dt(1);
  } else {
    row_of(0, t0_cur, len_cur);
    row_of(1, t0_next, len_next);
    issue(0, t0_cur, len_cur, true);
    issue(1, t0_next, len_next, true);
    load_initial();  // after the first loads are issued: it waits for global memory
  }
  scan::cp_async_wait_group<1>();  // the first chunk's x (the second's may still be in flight)
  wg::fence_proxy_async();
  __syncthreads();

  // Diagnostic (STRATA_SSD_TRACE, eager calls): cycles per phase summed over the block's chunks,
  // per warpgroup: [0] stage wait, [1] S_loc + C.B issue, [2] state received, [3] products
  // waited, [4] state out + ss, [5] Y_off, [6] Y_diag, [7] y store, [8] end of chunk; [9] chunks.
  long long ph[kPhases] = {};
  long long tick = clock64();
  const auto lap = [&](int k) {
    if (trace != nullptr) {
      const long long now = clock64();
      ph[k] += now - tick;
      tick = now;
    }
  };
  for (int i = 0; i < count; ++i) {
    const int k = i, st = i & 1;
    const int64_t t0 = t0_cur;
    const int len = __shfl_sync(0xffffffffu, len_cur, 0);
    int32_t t0_after, len_after;  // the row of the chunk after next, for its copies' issue below
    row_of(i + 2, t0_after, len_after);
    bf16* cs_t = cs_of(st);
    bf16* bs = bs_of(st);
    const bf16* xs = xs_of(st);
    const float* cum = dt_of(st);  // [Q] cum, then [Q] dt, then [Q] w
    const float* dts = cum + kQ;
    const float* ws = dts + kQ;
    lap(8);
    tma::bar_wait(&full[st], (i >> 1) & 1);  // C, B and the dt rows landed
    if (len < kQ) {  // the sequence's last chunk: B rows past it hold the next sequence: zeros
      clear_b_rows_past(bs, len);
      wg::fence_proxy_async();
      __syncthreads();
    }

    lap(0);
    // S_loc and the first C.B block first: they do not need the entering state.
    float own[R], cb[32], acc[R];
    uint32_t a[kQ / 16][4];
    s_loc_fragments(a, bs, ws, q, warp, lane);
    wg::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kQ / 16; ++ks)
      wg::mma_rs_bmn(own, a[ks], x_desc<P>(xs, ks), ks > 0 ? 1 : 0);
    issue_cb(cb, cs_t, bs, l0, 0);
    wg::commit();

    // The state entering chunk k is in the registers.
    lap(1);
    lap(2);
    wg::wait_all();  // S_loc and the C.B block
    wg::fence_regs(own);
    wg::fence_regs(cb);
    lap(3);
    const float decay = expf(cum[len - 1]);
    // bf16(S_in) [p][n], Y_off's B operand, by quad stores (9b 1x2048 measured 1% slower with
    // stmatrix and unmasked scores together, "twelfth session").
#pragma unroll
    for (int j = 0; j < NT; ++j)
      store_ss_quad(ss, s_in + 4 * j, 8 * j + 2 * ln.tig, n);
    // The state leaving the chunk: S_out = exp(cum_last) S_in + S_loc, kept here, or after the
    // last chunk stored to the slot. This is the whole serial part between two chunks.
#pragma unroll
    for (int e = 0; e < R; ++e)
      s_in[e] = decay * s_in[e] + own[e];
    if (k + 1 == count && slot_ok) {
#pragma unroll
      for (int j = 0; j < NT; ++j)
        store_state_quad(slot_state, s_in + 4 * j, 8 * j + 2 * ln.tig, n);
    }
    wg::fence_proxy_async();  // ss written by st.shared, read by Y_off
    __syncthreads();

    lap(4);
    // Y_off before the decay: C_l . S_in[p] over the state columns.
    wg::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk)
      wg::mma_ss(acc, sw_desc(cs_t, l0, kk), kmajor(ss + core_off(0, 16 * kk, kNC)),
                 kk > 0 ? 1 : 0);
    wg::commit();
    // While Y_off runs: block 0's scores (its C.B was waited for with S_loc), then warpgroup 1's
    // diagonal C.B block into the freed cb, waited for with Y_off.
    const float cum_a = cum[la], cum_b = cum[lb];
    uint32_t a0[4][4];
    decayed_scores(a0, cb, 0, cum, dts, la, lb, cum_a, cum_b, ln.tig);
    const bool diag_block = q == 1 && 64 < len;  // warpgroup 1's second C.B block; warp-uniform
    if (diag_block) {
      wg::fence_regs(cb);
      wg::wgmma_fence();
      issue_cb(cb, cs_t, bs, 64, 64);
      wg::commit();
    }
    wg::wait_all();
    wg::fence_regs(acc);
    wg::fence_regs(cb);

    // Y = exp(cum_l) Y_off + Y_diag + D x; a warpgroup with no rows in the chunk computes them
    // anyway and stores none (a wgmma under a condition makes ptxas wait for it at the join).
    const float ea = expf(cum_a), eb = expf(cum_b);
    scale_rows<NT>(acc, ea, eb);
    lap(5);
    y_diag_overlapped<NT>(acc, a0, cb, diag_block, xs, cum, dts, la, lb, cum_a, cum_b, lane);
    lap(6);
    if (l0 < len) store_y<NT>(acc, p, xs, cs_t, t0, len, h, Dh, q, la, lb, lane);

    // End of the chunk: its stage is free for the block's chunk after next, and ss for the
    // next chunk's state. The next chunk's x copies (issued a chunk ago) are waited for first,
    // so the barrier also publishes them. Generic writes to the stage (B zeros, the y tile)
    // are ordered before the async proxy's loads into it.
    lap(7);
    scan::cp_async_wait_group<0>();
    wg::fence_proxy_async();
    __syncthreads();
    issue(i + 2, t0_after, len_after, true);
    t0_cur = t0_next;
    len_cur = len_next;
    t0_next = t0_after;
    len_next = len_after;
    ++ph[9];
  }
  lap(8);
  if (trace != nullptr && (l & 127) == 0)
    for (int k = 0; k < kPhases; ++k)
      trace[(static_cast<int64_t>(blockIdx.x) * 2 + q) * kPhases + k] = ph[k];
#else
  __trap();  // built without sm_90a: supports() refuses every device this could run on
#endif
}

// Diagnostic (STRATA_SSD_TRACE set, eager calls only): the mean cycles per chunk of each phase
// over the blocks that took chunks, per warpgroup, on stderr.
void report_trace(long long* trace, int64_t blocks, cudaStream_t st) {
  std::vector<long long> h(static_cast<size_t>(blocks * 2 * kPhases));
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(h.data(), trace, h.size() * sizeof(long long), cudaMemcpyDeviceToHost, st));
  STRATA_CUDA_CHECK(cudaFreeAsync(trace, st));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
  static const char* names[] = {"stage wait",    "S_loc+CB issue", "received",
                                "products wait", "state out+ss",   "Y_off",
                                "Y_diag",        "y store",        "end"};
  for (int q = 0; q < 2; ++q) {
    double sum[kPhases] = {};
    for (int64_t b = 0; b < blocks; ++b)
      for (int k = 0; k < kPhases; ++k)
        sum[k] += static_cast<double>(h[(b * 2 + q) * kPhases + k]);
    if (sum[9] == 0) continue;
    std::fprintf(stderr, "ssd_seq trace wg%d blocks %lld chunks %.0f, cycles per chunk:", q,
                 static_cast<long long>(blocks), sum[9]);
    for (int k = 0; k < 9; ++k)
      std::fprintf(stderr, " %s %.0f", names[k], sum[k] / sum[9]);
    std::fprintf(stderr, "\n");
  }
}

template <int NT>
void launch_seq(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  constexpr int P = 8 * NT;
  constexpr int smem = seq_smem(P);
  static_assert(smem <= kMaxSmem, "the stages and ss fit one block's shared memory");
  const FusedScratch fs = fused_scratch_of(p);
  // The first loads before the table exists (the kernel's prologue) where every block starts at
  // once (one block per SM): measured 1-5% faster on one sequence, 1-2% slower on grids of
  // several waves (docs/BENCHMARKS.md, "twelfth session").
  const bool early = table_dt_rows_step(p, fs) && p.slots.n * p.heads <= ssm_scan_sm_count();
  if (!start_wg_scan(p, fs, index_errors, st, early)) return;
  static std::atomic<uint64_t> attr{0};
  scan::allow_smem(seq_scan_kernel<NT>, smem, attr);
  const CUtensorMap tm_c = tma_map_bf16_sw128(p.C, kQ), tm_b = tma_map_bf16_sw128(p.B, kQ);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.slots.n * p.heads));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;  // pdl.cuh
  at[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  const int64_t blocks = cfg.gridDim.x;
  long long* trace = trace_buffer(blocks * 2 * kPhases, st);
  STRATA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, seq_scan_kernel<NT>, p, fs, index_errors, trace,
                                       tm_c, tm_b, early ? 1 : 0));
  if (trace != nullptr) report_trace(trace, blocks, st);
  mark_scan_stage("wgmma (per sequence)");
}

}  // namespace

int ssm_scan_sm_count() {
  static std::atomic<int> cached{0};
  int v = cached.load(std::memory_order_relaxed);
  if (v == 0) {
    int dev = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&dev));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    cached.store(v, std::memory_order_relaxed);
  }
  return v;
}

void launch_ssm_scan_seq(const SsmLaunch& p, int* index_errors, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (wg_scan_nt(p, "ssm_scan_seq") == 8)
    launch_ssm_scan_ws(p, index_errors, stream);  // head_dim 64: the role-split kernel
  else
    launch_seq<10>(p, index_errors, st);
}

}  // namespace strata::cuda
