// Pieces of the sm_90a wgmma SSD scans (ssm_scan_wg.cu: a block per (chunk, head) with the state
// handed on between blocks; ssm_scan_seq.cu: a block per (sequence, head) walking its chunks with
// the state in registers): the tile layouts and their wgmma descriptors, the x staging copies,
// the dt rows kernel both run ahead, and the per-chunk products they share (S_loc's A fragments,
// Y_diag, the y store). Same math and rounding points as ssm_scan_mma.cu (ssm_scan_wg.cu's
// header).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/pdl.cuh"
#include "ops/cuda/ssm_scan_chain.cuh"
#include "ops/cuda/ssm_scan_common.cuh"
#include "ops/cuda/ssm_scan_cumsum_warp.cuh"
#include "ops/cuda/ssm_scan_mma_tiles.cuh"
#include "ops/cuda/ssm_scan_staging.cuh"
#include "ops/cuda/tma_sm90.cuh"
#include "ops/cuda/wgmma_bf16.cuh"

namespace strata::cuda::wgscan {

namespace {

using scan::FusedScratch;
using scan::scale_pair;

constexpr int kQ = 128;      // chunk
constexpr int kN = 128;      // state size
constexpr int kNC = kN / 8;  // core matrices per row of a [rows][N] tile
constexpr int kThreads = 256;
// Element offset of (r, c) in a tile of core matrices with `cb` of them per row: core
// (r / 8, c / 8) is 128 contiguous bytes, its 8 rows 16 bytes apart.
__device__ __forceinline__ int core_off(int r, int c, int cb) {
  return (((r >> 3) * cb + (c >> 3)) << 6) + ((r & 7) << 3) + (c & 7);
}

// Descriptors of the two operand forms. K-major ([rows][K] tile, K contiguous, kNC cores per
// row): LBO = the next core along K (128 bytes), SBO = the next 8 rows. MN-major (x: [s][p]
// tile, s = K, p = N contiguous, P / 8 cores per row): SBO = the next 8 columns p (128 bytes),
// LBO = the next 8 rows s.
__device__ __forceinline__ uint64_t kmajor(const bf16* at) {
  return wg::desc(at, 128, kNC * 128);
}
template <int P>
__device__ __forceinline__ uint64_t x_desc(const bf16* xs, int ks) {  // rows s in [16 ks, +16)
  return wg::desc(xs + 16 * ks * P, (P / 8) * 128, 128);
}
// The x tile [Q][P] in either of two layouts: core matrices (stage_core's copies, any P; kXSw
// false) or, at P = 64, one 128-byte-swizzled atom loaded by TMA (ssm_scan_ws.cu; kXSw true):
// the B descriptor of k-step ks, and element (r, p).
template <int P, bool kXSw>
__device__ __forceinline__ uint64_t x_desc_of(const bf16* xs, int ks) {
  if constexpr (kXSw) {
    static_assert(P == 64, "a swizzled x tile is one atom of 64 columns");
    return tma::desc_sw128_mn(xs, 16 * ks);
  } else {
    return x_desc<P>(xs, ks);
  }
}
template <int P, bool kXSw>
__device__ __forceinline__ const bf16* x_at(const bf16* xs, int r, int p) {
  if constexpr (kXSw)
    return reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(xs) +
                                         tma::sw128_piece(r, p >> 3)) +
           (p & 7);
  else
    return xs + core_off(r, p, P / 8);
}

// tile(r, k) = src[(t0 + r) ld + col0 + k] for r < valid, 0 for valid <= r < kQ, k < W; left in
// flight (the caller commits, waits, fences and synchronizes). Lanes 8 apart take 8 consecutive
// rows of one 16-byte column, i.e. one core matrix (conflict-free stores), and a warp 64
// contiguous bytes of each of 8 rows. A fixed count per thread, unrolled: the runtime loop it
// replaces compiled to ~230 instructions of remainder handling per call.
template <int W>
__device__ __forceinline__ void stage_core(bf16* tile, const bf16* src, int64_t ld, int64_t t0,
                                           int valid, int64_t col0) {
  constexpr int V = W / 8, kCopies = kQ * V;
  static_assert(kCopies % kThreads == 0, "every thread takes the same number of copies");
  const bf16* base = src + t0 * ld + col0;
#pragma unroll
  for (int j = 0; j < kCopies / kThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    const int rest = i >> 3, rb = rest / V, v = rest - rb * V, r = 8 * rb + (i & 7);
    scan::cp_async16(tile + core_off(r, 8 * v, V), r < valid ? base + r * ld + 8 * v : base,
                     r < valid);
  }
}

// C and B tiles: two 128-byte-swizzled atoms each ([Q][64] columns n in [0, 64), then [64,
// 128)), loaded by TMA; the rest as before. + 1 KB: the atoms start 1024-byte aligned.
constexpr int kAtom = kQ * 64;  // elements of one atom
constexpr uint32_t kTmaBytes = 4 * kAtom * sizeof(bf16);
// dt_rows_kernel's output per (chunk, head): cum, dt and w, Q floats each (the order of the
// shared arrays), in FusedScratch::aggregate (which only the look-back kernel uses otherwise).
constexpr int kDtRow = 3 * kQ;
constexpr uint32_t kDtRowBytes = kDtRow * sizeof(float);
// One stage of the per-sequence kernels: C, B (swizzled), x [Q][P] (cores, or in
// ssm_scan_ws.cu one swizzled atom) and the dt rows, rounded up to the atoms' 1024-byte
// alignment.
__host__ __device__ constexpr int stage_bytes(int P) {
  return ((2 * kQ * kN + kQ * P) * 2 + kDtRow * 4 + 1023) / 1024 * 1024;
}
// The 16-byte piece of rows r, columns [n0, n0 + 8) (n0 a multiple of 8) of a swizzled C or B
// tile.
__device__ __forceinline__ const bf16* sw_at(const bf16* tile, int r, int n0) {
  return reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(tile + (n0 >> 6) * kAtom) +
                                       tma::sw128_piece(r, (n0 & 63) >> 3));
}
// K-major descriptor of rows [row0, row0 + 64) of a swizzled tile, K-columns [16 kk, +16).
__device__ __forceinline__ uint64_t sw_desc(const bf16* tile, int row0, int kk) {
  return tma::desc_sw128(tile + (kk >> 2) * kAtom, row0, 16 * (kk & 3));
}

// The chunk's dt prologue for every (chunk, head), one warp each, ahead of the chain: cum, dt
// and w (scan::chunk_cumsum_warp, the values the kernel formed itself before) into
// fs.aggregate [nc][Hm][3][Q], so a block's critical path no longer holds the dt loads and the
// cumsum (~6-8K cycles of ~26K, docs/BENCHMARKS.md "eighth session"). It also clears the
// hand-over flags and the ticket (the memset the other one-pass kernels launch).
// grid ceil(nc Hm / 8), block 256.
// Warp u = (chunk, head h)'s dt rows (cum, dt, w) of a chunk of `len` rows from t0 into
// fs.aggregate.
__device__ __forceinline__ void write_dt_rows(const SsmLaunch& p, const FusedScratch& fs, int64_t u,
                                              int64_t h, int64_t t0, int len) {
  float* out = fs.aggregate + u * kDtRow;
  const scan::WarpChunkDt d = scan::load_chunk_dt_warp(p, t0, len, h);
  scan::chunk_cumsum_warp(p, d, len, h, out + kQ, out, out + 2 * kQ);
}

__global__ void __launch_bounds__(256) dt_rows_kernel(SsmLaunch p, FusedScratch fs) {
  pdl_enter();  // launched with launch_pdl (pdl.cuh): the chunk table kernel is before it
  const int64_t Hm = p.heads, units = fs.ch.max_chunks * Hm;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (u == 0 && threadIdx.x == 0) *fs.ticket = 0;
  if (u >= units) return;
  if ((threadIdx.x & 31) == 0) fs.flags[u] = 0;
  const int64_t c = u / Hm, h = u - c * Hm;
  const int32_t* row = fs.ch.table + 3 * c;
  const int len = row[2];
  if (len == 0) return;  // past every sequence: its block returns before reading the rows
  write_dt_rows(p, fs, u, h, row[1], len);
}

// The chunk table and the dt rows in one kernel, for steps of at most kTableSeqs sequences
// (every prefill the per-sequence scan takes): each warp finds its chunk's row from cu_seqlens
// itself (lane b holds sequence b's chunk count, 0 for offsets chunk_table_kernel refuses; a
// warp scan gives each sequence's first chunk; counts capped at the table as chunk_table_kernel
// caps them), head 0's warps write the table rows, warp 0 writes seq_chunks and counts the
// refused offsets and the cut sequences, and every warp goes on to its dt rows as
// dt_rows_kernel does. One launch and one dependent round trip fewer than chunk_table_kernel
// then dt_rows_kernel (docs/BENCHMARKS.md, "tenth session"). grid ceil(nc Hm / 8), block 256.
constexpr int kTableSeqs = 32;
// Lane b's sequence of a step of at most kTableSeqs (all lanes of the warp): its offsets (start,
// len), its first chunk row and its chunk count as the chunk table holds them (0 for offsets
// outside the packed tokens: bad; counts capped at the rows left: cut), from cu_seqlens alone.
// The table kernel below writes these; ssm_scan_seq.cu forms the same values before the table
// exists, to start its first loads early.
struct WarpSeq {
  int32_t start = 0, len = 0, first = 0, n = 0;
  bool bad = false, cut = false;
};
__device__ __forceinline__ WarpSeq warp_seq_chunks(const SsmLaunch& p, int64_t max_chunks,
                                                   int lane) {
  const int nseq = static_cast<int>(p.slots.n);
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens.p);
  WarpSeq w;
  if (lane < nseq) {
    w.start = cu[lane];
    w.len = cu[lane + 1] - w.start;
    w.n = scan::seq_chunk_count(w.start, w.len, p.x.rows, kQ, &w.bad);
  }
  int32_t incl = w.n;  // chunks of sequences 0..lane
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  // Counts capped at the rows left (scan::fit_chunks says why): the sums of the capped counts
  // before a sequence are the uncapped ones clamped to the table.
  w.first = static_cast<int32_t>(min(static_cast<int64_t>(incl - w.n), max_chunks));
  w.n = scan::fit_chunks(w.n, w.first, max_chunks, &w.cut);
  return w;
}

// The per-sequence kernels' (ssm_scan_seq.cu, ssm_scan_ws.cu) view of block b's sequence on an
// early step: warp_seq_chunks' values of lane b, warp-uniform through shuffles (so ptxas keeps
// the wgmma under conditions on them pipelined).
struct BlockSeq {
  int32_t first = 0, count = 0, start = 0, len = 0;
};
__device__ __forceinline__ BlockSeq block_seq_chunks(const SsmLaunch& p, int64_t max_chunks,
                                                     int lane, int64_t b) {
  const WarpSeq w = warp_seq_chunks(p, max_chunks, lane);
  BlockSeq s;
  s.first = __shfl_sync(0xffffffffu, w.first, static_cast<int>(b));
  s.count = __shfl_sync(0xffffffffu, w.n, static_cast<int>(b));
  s.start = __shfl_sync(0xffffffffu, w.start, static_cast<int>(b));
  s.len = __shfl_sync(0xffffffffu, w.len, static_cast<int>(b));
  return s;
}

// Sequence b's Mamba slot as the per-sequence kernels read it: its state of head h (slot 0's
// when the index is out of range: `ok` false, the caller counts it) and whether the sequence
// continues from it.
struct SeqSlot {
  float* state = nullptr;
  int32_t has_initial = 0;
  bool ok = false;
};
__device__ __forceinline__ SeqSlot read_seq_slot(const SsmLaunch& p, int64_t b, int64_t h,
                                                 int64_t PN) {
  SeqSlot s;
  const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
  s.has_initial = static_cast<const int32_t*>(p.has_initial.p)[b];
  s.ok = slot >= 0 && slot < p.num_slots;
  s.state = p.states + (static_cast<int64_t>(s.ok ? slot : 0) * p.heads + h) * PN;
  return s;
}

// `early` (ssm_scan_seq.cu's one-wave grids): this kernel waits for the op's producer kernels
// BEFORE it lets the scan after it be scheduled (pdl_enter the other way round), so when the scan
// starts every kernel before this one has completed, and the scan loads its first x, B and C
// tiles (written by those kernels) while this one runs. Else pdl_enter, as every other kernel.
__global__ void __launch_bounds__(256)
    table_dt_rows_kernel(SsmLaunch p, FusedScratch fs, int* errors, int early) {
  if (early != 0) {
    pdl_wait();
    pdl_trigger();
  } else {
    pdl_enter();
  }
  const int64_t Hm = p.heads, units = fs.ch.max_chunks * Hm;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (u == 0 && lane == 0) *fs.ticket = 0;
  if (u >= units) return;
  if (lane == 0) fs.flags[u] = 0;
  const int64_t c = u / Hm, h = u - c * Hm;
  const int nseq = static_cast<int>(p.slots.n);
  const WarpSeq w = warp_seq_chunks(p, fs.ch.max_chunks, lane);
  const int32_t start = w.start, len = w.len, first = w.first, n = w.n;
  const bool bad = w.bad, cut = w.cut;
  if (u == 0 && lane < nseq) {
    fs.ch.seq_chunks[2 * lane] = first;
    fs.ch.seq_chunks[2 * lane + 1] = n;
    if (bad) atomicAdd(errors, 1);  // offsets outside the packed tokens: the sequence is skipped
    if (cut) atomicAdd(errors, 1);  // more chunks than rows left (overlapping sequences)
  }
  const unsigned owner = __ballot_sync(0xffffffffu, lane < nseq && c >= first && c < first + n);
  int32_t row_b = 0, row_t0 = 0, row_len = 0;  // past every sequence: length 0
  if (owner != 0) {                            // warp-uniform
    const int b = __ffs(owner) - 1;
    const int32_t i = static_cast<int32_t>(c) - __shfl_sync(0xffffffffu, first, b);
    row_b = b;
    row_t0 = __shfl_sync(0xffffffffu, start, b) + i * kQ;
    row_len = min(kQ, __shfl_sync(0xffffffffu, len, b) - i * kQ);
  }
  if (h == 0 && lane == 0) {
    int32_t* row = fs.ch.table + 3 * c;
    row[0] = row_b;
    row[1] = row_t0;
    row[2] = row_len;
  }
  if (row_len == 0) return;
  write_dt_rows(p, fs, u, h, row_t0, row_len);
}

// What both wgmma scans launch before their main kernel: the chunk table and the dt rows of
// every (chunk, head), in one kernel for up to kTableSeqs sequences, else the chunk table kernel
// then dt_rows_kernel. These and the main kernels are launched as programmatic dependents
// (pdl.cuh): each is scheduled while the kernel before it finishes, and waits for it before
// touching global memory. Returns false when the step has no tokens (start_one_pass finished the
// slots of its empty sequences; there is nothing more to launch).
// Whether start_wg_scan takes table_dt_rows_kernel for this step (ssm_scan_seq.cu may start its
// first loads early on those steps only).
inline bool table_dt_rows_step(const SsmLaunch& p, const FusedScratch& fs) {
  return p.slots.n <= kTableSeqs && fs.ch.max_chunks * p.heads > 0;
}
// `early`: table_dt_rows_kernel's order (above); only where table_dt_rows_step holds.
inline bool start_wg_scan(const SsmLaunch& p, const FusedScratch& fs, int* index_errors,
                          cudaStream_t st, bool early = false) {
  const int64_t units = fs.ch.max_chunks * p.heads;
  const dim3 grid(static_cast<unsigned>((units + 7) / 8));
  if (table_dt_rows_step(p, fs)) {
    launch_pdl(table_dt_rows_kernel, grid, dim3(256), 0, st, p, fs, index_errors, early ? 1 : 0);
    mark_scan_stage("table_dt_rows");
    return true;
  }
  if (!scan::start_one_pass(p, fs, index_errors, st, /*clear_flags=*/false)) return false;
  launch_pdl(dt_rows_kernel, grid, dim3(256), 0, st, p, fs);
  mark_scan_stage("dt_rows");
  return true;
}

// Diagnostic buffer of `entries` zeroed long longs when STRATA_SSD_TRACE is set and `st` is not
// being captured (the kernels' phase clocks, read back after an eager call), else null.
inline long long* trace_buffer(int64_t entries, cudaStream_t st) {
  static const bool want = std::getenv("STRATA_SSD_TRACE") != nullptr;
  if (!want) return nullptr;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(st, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return nullptr;
  long long* trace = nullptr;
  const size_t bytes = static_cast<size_t>(entries) * sizeof(long long);
  STRATA_CUDA_CHECK(cudaMallocAsync(&trace, bytes, st));
  STRATA_CUDA_CHECK(cudaMemsetAsync(trace, 0, bytes, st));
  return trace;
}

// The launchers' checks (their supports() has refused every other case): returns NT = P / 8.
inline int wg_scan_nt(const SsmLaunch& p, const char* kernel) {
  const auto fail = [&](const char* what) {
    STRATA_CUDA_FAIL((std::string(kernel) + " called with " + what).c_str());
  };
  if (p.x.dt != DType::BF16) fail("a non-bf16 act dtype");
  if (p.chunk_size != kQ || p.state_size != kN) fail("an unsupported chunk or state size");
  if (p.head_dim != 64 && p.head_dim != 80) fail("an unsupported head_dim (checked in supports)");
  return static_cast<int>(p.head_dim / 8);
}

// wgmma and TMA exist only in the sm_90a build; every function below is called from kernels whose
// bodies are compiled for it alone.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// One thread: the chunk's C and B rows (TMA, two swizzled atoms each; rows past the tensor
// arrive as zeros) and its dt rows (dt_rows_kernel's cum / dt / w, one bulk copy) for (chunk c,
// head h) of group g, all on `bar`. The caller clears B rows of a following sequence
// (clear_b_rows_past) once they landed.
// In two parts for ssm_scan_seq.cu, which may issue C and B before the dt rows exist: the
// barrier is armed with every byte by the first, so it completes once both have landed.
// `extra_bytes`: what the caller loads on the same barrier besides (ssm_scan_ws.cu: the x tile).
__device__ __forceinline__ void load_chunk_cb(bf16* cs, bf16* bs, int64_t g, int64_t t0,
                                              const CUtensorMap* tm_c, const CUtensorMap* tm_b,
                                              uint64_t* bar, uint32_t extra_bytes = 0) {
  tma::bar_arrive_expect(bar, kTmaBytes + kDtRowBytes + extra_bytes);
  const int col = static_cast<int>(g * kN), row = static_cast<int>(t0);
  tma::load_2d(cs, tm_c, col, row, bar);
  tma::load_2d(cs + kAtom, tm_c, col + 64, row, bar);
  tma::load_2d(bs, tm_b, col, row, bar);
  tma::load_2d(bs + kAtom, tm_b, col + 64, row, bar);
}
// C's first atom (columns 0..63) alone (ssm_scan_ws.cu from its third chunk on: those rows may
// still hold y tiles being stored when the rest of the stage is loaded).
__device__ __forceinline__ void load_chunk_c_first_atom(bf16* cs, int64_t g, int64_t t0,
                                                        const CUtensorMap* tm_c, uint64_t* bar) {
  tma::load_2d(cs, tm_c, static_cast<int>(g * kN), static_cast<int>(t0), bar);
}
__device__ __forceinline__ void load_chunk_dt(float* dt_rows, const FusedScratch& fs, int64_t c,
                                              int64_t h, int64_t heads, uint64_t* bar) {
  tma::load_1d(dt_rows, fs.aggregate + (c * heads + h) * kDtRow, kDtRowBytes, bar);
}
__device__ __forceinline__ void load_chunk_tiles(bf16* cs, bf16* bs, float* dt_rows,
                                                 const FusedScratch& fs, int64_t c, int64_t h,
                                                 int64_t heads, int64_t g, int64_t t0,
                                                 const CUtensorMap* tm_c, const CUtensorMap* tm_b,
                                                 uint64_t* bar) {
  load_chunk_cb(cs, bs, g, t0, tm_c, tm_b, bar);
  load_chunk_dt(dt_rows, fs, c, h, heads, bar);
}

// B rows len .. Q - 1 of a loaded tile hold the next sequence (or zeros): cleared, so that its
// non-finite values cannot reach this one through w_s = 0. Every thread of the block; the
// caller fences (generic -> async proxy) and synchronizes.
__device__ __forceinline__ void clear_b_rows_past(bf16* bs, int len) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = static_cast<int>(threadIdx.x) + 16 * len; i < 16 * kQ; i += kThreads)
    *reinterpret_cast<uint4*>(bs + (i & 8 ? kAtom : 0) + (i >> 4) * 64 + 8 * (i & 7)) = zero;
}

// A thread's four state values in the accumulator layout of S_loc^T (rows n, n + 8; columns pp,
// pp + 1): r[0] = S[pp][n], r[1] = S[pp + 1][n], r[2] = S[pp][n + 8], r[3] = S[pp + 1][n + 8] of
// an f32 [P][N] state (a slot), and their bf16 copies in the [P][N] core tile ss (Y_off's B).
__device__ __forceinline__ void load_state_quad(float* r, const float* state, int pp, int n) {
  r[0] = state[pp * kN + n];
  r[1] = state[(pp + 1) * kN + n];
  r[2] = state[pp * kN + n + 8];
  r[3] = state[(pp + 1) * kN + n + 8];
}
__device__ __forceinline__ void store_state_quad(float* state, const float* r, int pp, int n) {
  state[pp * kN + n] = r[0];
  state[(pp + 1) * kN + n] = r[1];
  state[pp * kN + n + 8] = r[2];
  state[(pp + 1) * kN + n + 8] = r[3];
}
__device__ __forceinline__ void store_ss_quad(bf16* ss, const float* r, int pp, int n) {
  ss[core_off(pp, n, kNC)] = __float2bfloat16_rn(r[0]);
  ss[core_off(pp + 1, n, kNC)] = __float2bfloat16_rn(r[1]);
  ss[core_off(pp, n + 8, kNC)] = __float2bfloat16_rn(r[2]);
  ss[core_off(pp + 1, n + 8, kNC)] = __float2bfloat16_rn(r[3]);
}

// bf16(S_in) of this warp's 16 state rows into ss by stmatrix .trans, from the thread's f32
// state slots (ssm_scan_ws.cu: slots[j * kThreads + l] = S^T rows n_row0 + grp, + 8, columns
// 8 j + 2 tig, + 1, the accumulator layout of S_loc^T as a float4 per 8-column group j), i.e.
// per j two 8 x 8 fragments whose transposes are the [p][n] core matrices (p in [8 j, +8), n in
// [n_row0, +8) and [n_row0 + 8, +8)) of ss. One .x4 stores two j's: lane 8 m + r gives row
// p = 8 (j + m / 2) + r of fragment m. 4 stores and 16 packs per thread where quad stores take
// 32 two-byte stores and 32 conversions, on the serial path between two chunks.
template <int NT>
__device__ __forceinline__ void store_ss_trans(bf16* ss, const float4* slots, int n_row0,
                                               int lane, int l) {
  static_assert(NT % 2 == 0, "pairs of 8-column groups per store");
  const int m = lane >> 3, r = lane & 7;
#pragma unroll
  for (int j = 0; j < NT; j += 2) {
    const float4 v0 = slots[j * kThreads + l], v1 = slots[(j + 1) * kThreads + l];
    const uint32_t at = tma::smem_u32(ss + core_off(8 * (j + (m >> 1)) + r, n_row0 + 8 * (m & 1),
                                                    kNC));
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(at),
        "r"(mma::pack_bf16(v0.x, v0.y)), "r"(mma::pack_bf16(v0.z, v0.w)),
        "r"(mma::pack_bf16(v1.x, v1.y)), "r"(mma::pack_bf16(v1.z, v1.w))
        : "memory");
  }
}

// S_loc^T rows n in [64 q + 16 warp, +16) as wgmma A fragments: A[n][s] = bf16(w_s B_s[n])
// (ldmatrix .trans of the swizzled [s][n] B tile, scaled by w), one [4] per k-step of 16 s:
// a[t] = k-step k0 + t (all kQ / 16 of them by default).
template <int KS = kQ / 16>
__device__ __forceinline__ void s_loc_fragments(uint32_t (&a)[KS][4], const bf16* bs,
                                                const float* ws, int q, int warp, int lane,
                                                int k0 = 0) {
  const mma::Lane ln(lane);
  const int m0 = 64 * q + 16 * warp, j = lane >> 3, i = lane & 7;
#pragma unroll
  for (int t = 0; t < KS; ++t) {
    const int ks = k0 + t;
    mma::ldsm_x4_trans(a[t], sw_at(bs, 16 * ks + ((j >> 1) << 3) + i, m0 + ((j & 1) << 3)));
    const int s = 16 * ks + 2 * ln.tig;
    const float2 w0 = *reinterpret_cast<const float2*>(ws + s);
    const float2 w8 = *reinterpret_cast<const float2*>(ws + s + 8);
    a[t][0] = scale_pair(a[t][0], w0.x, w0.y);
    a[t][1] = scale_pair(a[t][1], w0.x, w0.y);
    a[t][2] = scale_pair(a[t][2], w8.x, w8.y);
    a[t][3] = scale_pair(a[t][3], w8.x, w8.y);
  }
}

// The C.B block of a warpgroup's 64 output rows l0.. against positions [s0, s0 + 64), issued
// into cb (not committed): A = C [l][n], B = B [s][n], both swizzled K-major.
__device__ __forceinline__ void issue_cb(float (&cb)[32], const bf16* cs, const bf16* bs, int l0,
                                         int s0) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
    wg::mma_ss(cb, sw_desc(cs, l0, kk), sw_desc(bs, s0, kk), kk > 0 ? 1 : 0);
}

// __expf's instruction with denormal results flushed to zero: the non-ftz form costs a compare,
// two multiplies and a select around each ex2 (the scores' largest instruction count, ncu,
// "tenth session"). A flushed term is below 2^-126 of its C.B dt, far inside the bf16 bands.
__device__ __forceinline__ float exp_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
template <bool kMask>
__device__ __forceinline__ float masked_score(float cbv, float cum_l, float cum_s, float dt_s,
                                              bool keep) {
  const float v = cbv * exp_ftz(cum_l - cum_s) * dt_s;
  return !kMask || keep ? v : 0.f;
}
// The decayed scores of one 64-position block [s0, s0 + 64) for this thread's rows la, lb as the
// A fragments of scores . x: a[t] = k-step t (positions s0 + 16 t ..), from its C.B block cb in
// the accumulator layout (cb[8 t .. 8 t + 7] = rows la, lb at s, s + 1, then at s + 8, s + 9,
// s = s0 + 16 t + 2 tig):
//   score[l][s] = bf16(C.B[l][s] exp(cum_l - cum_s) dt_s) for s <= l, else 0.
// Branch-free, every load a float2 shared by both rows, so the 32 scores' chains (load,
// exp, two products) interleave: the per-pair branches they replace issued them one after
// another, ~3K cycles per block in the trace against ~0.4K of tensor work (docs/BENCHMARKS.md,
// "ninth session"). Rows past the chunk (l >= len) are not masked: their C rows hold the fill or
// the next sequence, and their outputs are never stored (every product is row-local in l).
// kMask = false for a block wholly below the diagonal (every s < every row): no tests.
template <bool kMask = true>
__device__ __forceinline__ void decayed_scores(uint32_t (&a)[4][4], const float (&cb)[32], int s0,
                                               const float* cum, const float* dts, int la, int lb,
                                               float cum_a, float cum_b, int tig) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int s = s0 + 16 * t + 2 * tig;
    const float2 c0 = *reinterpret_cast<const float2*>(cum + s);
    const float2 c8 = *reinterpret_cast<const float2*>(cum + s + 8);
    const float2 d0 = *reinterpret_cast<const float2*>(dts + s);
    const float2 d8 = *reinterpret_cast<const float2*>(dts + s + 8);
    const float* v = cb + 8 * t;
    a[t][0] = mma::pack_bf16(masked_score<kMask>(v[0], cum_a, c0.x, d0.x, s <= la),
                             masked_score<kMask>(v[1], cum_a, c0.y, d0.y, s + 1 <= la));
    a[t][1] = mma::pack_bf16(masked_score<kMask>(v[2], cum_b, c0.x, d0.x, s <= lb),
                             masked_score<kMask>(v[3], cum_b, c0.y, d0.y, s + 1 <= lb));
    a[t][2] = mma::pack_bf16(masked_score<kMask>(v[4], cum_a, c8.x, d8.x, s + 8 <= la),
                             masked_score<kMask>(v[5], cum_a, c8.y, d8.y, s + 9 <= la));
    a[t][3] = mma::pack_bf16(masked_score<kMask>(v[6], cum_b, c8.x, d8.x, s + 8 <= lb),
                             masked_score<kMask>(v[7], cum_b, c8.y, d8.y, s + 9 <= lb));
  }
}

// exp(cum_l) Y_off: the thread's accumulators of row la (4 j, 4 j + 1) times ea, of row lb
// (4 j + 2, 4 j + 3) times eb.
template <int NT>
__device__ __forceinline__ void scale_rows(float (&acc)[4 * NT], float ea, float eb) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    acc[4 * j + 0] *= ea;
    acc[4 * j + 1] *= ea;
    acc[4 * j + 2] *= eb;
    acc[4 * j + 3] *= eb;
  }
}

// Y_diag into acc for the warpgroup's rows la, lb (this thread's two), per 64-position block
// s in [64 hb, +64) up to the diagonal block q: the C.B block in cb (issued by the caller for
// hb = 0, committed and waited for) turned into the decayed scores' A fragments, then
// scores . x. The next block's C.B is issued beside this block's scores . x (cb is free once the
// scores are formed): one wait for both instead of one each. (ssm_scan_wg.cu's form: at its 128
// registers y_diag_overlapped spills.)
template <int NT>
__device__ __forceinline__ void y_diag(float (&acc)[4 * NT], float (&cb)[32], const bf16* cs,
                                       const bf16* bs, const bf16* xs, const float* cum,
                                       const float* dts, int len, int q, int la, int lb,
                                       float cum_a, float cum_b, int lane) {
  constexpr int P = 8 * NT;
  const mma::Lane ln(lane);
  const int l0 = 64 * q;
  for (int hb = 0; hb <= q && 64 * hb < len; ++hb) {
    uint32_t a[4][4];
    decayed_scores(a, cb, 64 * hb, cum, dts, la, lb, cum_a, cum_b, ln.tig);
    const bool next = hb < q && 64 * (hb + 1) < len;  // warp-uniform
    wg::fence_regs(cb);
    wg::fence_regs(acc);
    wg::wgmma_fence();
    if (next) issue_cb(cb, cs, bs, l0, 64 * (hb + 1));
#pragma unroll
    for (int t = 0; t < 4; ++t)
      wg::mma_rs_bmn(acc, a[t], x_desc<P>(xs, 4 * hb + t), 1);
    wg::commit();
    wg::wait_all();
    wg::fence_regs(acc);
    wg::fence_regs(cb);
  }
}

// y_diag with both C.B blocks formed and waited for by the caller (ssm_scan_seq.cu, beside Y_off)
// and block 0's scores too (a0): block 0's scores . x is issued, then for warpgroup 1 with rows
// in the chunk (`diag_block`: its rows reach the diagonal C.B block, 64 .. 127) that block's
// scores are formed from cb while that product runs.
// (Reading cb after a partial wait instead, wgmma.wait_group 1, makes ptxas serialize every
// wgmma of the kernel: its C7514.)
template <int NT, bool kXSw = false>
__device__ __forceinline__ void y_diag_overlapped(float (&acc)[4 * NT], const uint32_t (&a0)[4][4],
                                                  const float (&cb)[32], bool diag_block,
                                                  const bf16* xs, const float* cum,
                                                  const float* dts, int la, int lb, float cum_a,
                                                  float cum_b, int lane) {
  constexpr int P = 8 * NT;
  const mma::Lane ln(lane);
  wg::fence_regs(acc);
  wg::wgmma_fence();
#pragma unroll
  for (int t = 0; t < 4; ++t)
    wg::mma_rs_bmn(acc, a0[t], x_desc_of<P, kXSw>(xs, t), 1);
  wg::commit();
  if (diag_block) {
    uint32_t a1[4][4];
    decayed_scores(a1, cb, 64, cum, dts, la, lb, cum_a, cum_b, ln.tig);
    wg::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 4; ++t)
      wg::mma_rs_bmn(acc, a1[t], x_desc_of<P, kXSw>(xs, 4 + t), 1);
    wg::commit();
  }
  wg::wait_all();
  wg::fence_regs(acc);
}

// y = bf16(acc + Dh x) of this thread's pairs (rows la, lb of the chunk; columns pp, pp + 1 of
// every 8-column group j, pp = 8 j + 2 tig) into a shared tile at at(r, j, pp), r the row within
// the warpgroup's 64 (l0 ..). x[l][pp], x[l][pp + 1] are adjacent in a core row: one load.
template <int NT, bool kXSw = false, class At>
__device__ __forceinline__ void y_pairs_to_tile(const float (&acc)[4 * NT], const bf16* xs,
                                                float Dh, int l0, int la, int lb, int tig, At at) {
  constexpr int P = 8 * NT;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int pp = 8 * j + 2 * tig;
    const float2 xa =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x_at<P, kXSw>(xs, la, pp)));
    const float2 xb =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x_at<P, kXSw>(xs, lb, pp)));
    *reinterpret_cast<__nv_bfloat162*>(at(la - l0, j, pp)) =
        __floats2bfloat162_rn(acc[4 * j + 0] + Dh * xa.x, acc[4 * j + 1] + Dh * xa.y);
    *reinterpret_cast<__nv_bfloat162*>(at(lb - l0, j, pp)) =
        __floats2bfloat162_rn(acc[4 * j + 2] + Dh * xb.x, acc[4 * j + 3] + Dh * xb.y);
  }
}
// Named barrier 1 + q over warpgroup q's 128 threads (0 is __syncthreads).
__device__ __forceinline__ void warpgroup_sync(int q) {
  if (q == 0)
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// y = bf16(acc + Dh x) (Dh: the head's D, loaded by the caller off the critical path) for the
// warpgroup's rows l0 .. l0 + 63 of a chunk of `len` rows starting at
// token t0, head h. Through shared memory when the rows allow 16-byte stores (a thread's own
// pairs are 4 bytes in 8 rows): the tile takes this warpgroup's C rows, which only its own
// products read, all waited for by the caller; rows 0..31 in the first atom's rows l0.., 32..63
// in the second's (8 KB each); rows P + 8 apart keep the pair stores conflict-free.
// warpgroup_sync orders the warpgroup's tile writes before its reads.
template <int NT, bool kXSw = false>
__device__ __forceinline__ void store_y(const float (&acc)[4 * NT], const SsmLaunch& p,
                                        const bf16* xs, bf16* cs, int64_t t0, int len, int64_t h,
                                        float Dh, int q, int la, int lb, int lane) {
  constexpr int P = 8 * NT, PC = P / 8;
  const mma::Lane ln(lane);
  const int l0 = 64 * q;
  bf16* ym = static_cast<bf16*>(p.out.p);
  bf16* yrow = ym + t0 * p.out.ld + h * P;  // row 0 of the chunk's y, this head's columns
  if ((reinterpret_cast<uintptr_t>(yrow) & 15u) == 0 && (p.out.ld & 7) == 0) {
    constexpr int LY = P + 8;
    static_assert(32 * LY <= 64 * 64, "half the y tile fits in 64 rows of one atom");
    const auto yt = [&](int r) { return cs + (r < 32 ? 0 : kAtom) + l0 * 64 + (r & 31) * LY; };
    y_pairs_to_tile<NT, kXSw>(acc, xs, Dh, l0, la, lb, ln.tig,
                              [&](int r, int, int pp) { return yt(r) + pp; });
    warpgroup_sync(q);
    const int rows = min(64, len - l0);
    const int t = static_cast<int>(threadIdx.x) & 127;
    static_assert(64 * PC % 128 == 0, "every thread stores the same number of pieces");
#pragma unroll
    for (int j = 0; j < 64 * PC / 128; ++j) {  // a fixed count, unrolled (rows may be fewer)
      const int i = t + 128 * j, r = i / PC, v = i - r * PC;
      if (r < rows)
        *reinterpret_cast<uint4*>(yrow + (l0 + r) * p.out.ld + 8 * v) =
            *reinterpret_cast<const uint4*>(yt(r) + 8 * v);
    }
  } else {
    const bool pairs = (reinterpret_cast<uintptr_t>(ym) & 3u) == 0 && (p.out.ld & 1) == 0;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      if (la < len)
        scan::store_y_pair(ym + (t0 + la) * p.out.ld + h * P + pp, pairs,
                           acc[4 * j + 0] + Dh * __bfloat162float(*x_at<P, kXSw>(xs, la, pp)),
                           acc[4 * j + 1] + Dh * __bfloat162float(*x_at<P, kXSw>(xs, la, pp + 1)));
      if (lb < len)
        scan::store_y_pair(ym + (t0 + lb) * p.out.ld + h * P + pp, pairs,
                           acc[4 * j + 2] + Dh * __bfloat162float(*x_at<P, kXSw>(xs, lb, pp)),
                           acc[4 * j + 3] + Dh * __bfloat162float(*x_at<P, kXSw>(xs, lb, pp + 1)));
    }
  }
}

// store_y for head_dim 64, x one swizzled atom (ssm_scan_ws.cu, the one caller) and a full
// chunk (every row of the warpgroup's 64 is the sequence's)
// with a y tensor map (tm_y: boxes of 64 rows x 64 columns, 128-byte swizzle): the tile is
// written in the swizzled layout into the warpgroup's rows of C's first atom (only its own
// products read them, all waited for), then stored by one TMA from thread 128 q. That thread
// waits for the tile to be read (tma::wait_store_read) before the rows are loaded again: the
// caller's part (ssm_scan_ws.cu waits in the next chunk). Replaces store_y's copy-out loop (a
// shared load, an address and a 16-byte global store per piece) with one instruction.
__device__ __forceinline__ void store_y_tma(const float (&acc)[32], const CUtensorMap* tm_y,
                                            const bf16* xs, bf16* cs, int64_t t0, int64_t h,
                                            float Dh, int q, int la, int lb, int lane) {
  constexpr int P = 64;
  const mma::Lane ln(lane);
  const int l0 = 64 * q;
  unsigned char* tile = reinterpret_cast<unsigned char*>(cs + l0 * 64);  // 1024-byte aligned
  // Pair (r, pp) in the swizzled tile: its 16-byte piece j, then 2 tig elements (4 tig bytes).
  y_pairs_to_tile<8, true>(acc, xs, Dh, l0, la, lb, ln.tig, [&](int r, int j, int) {
    return reinterpret_cast<bf16*>(tile + tma::sw128_piece(r, j) + 4 * ln.tig);
  });
  wg::fence_proxy_async();  // the tile's st.shared before the async proxy reads it
  warpgroup_sync(q);
  if ((threadIdx.x & 127) == 0) {
    tma::store_2d(tm_y, static_cast<int>(h * P), static_cast<int>(t0 + l0), tile);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace
}  // namespace strata::cuda::wgscan
