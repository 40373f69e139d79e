// Mamba2 chunked scan (SSD), cuda.ssd_seq at head_dim 64 (Nano-3): a block per (sequence,
// head), or a cluster of 2-4 taking its chunks in turn, with its warpgroups split by role: four
// per block, two on the state (S_loc^T of the state rows n in [64 q, +64), the entering state
// written to ss, the hand-over, the next stage's loads) and two on the output (the C.B blocks,
// the decayed scores, Y_off, Y_diag and the y store of the chunk rows l in [64 q, +64)).
// ssm_scan_seq.cu's two warpgroups (head_dim 80) each do one state half and one output half in
// turn, in lock step through the chunk's barriers, two warps per scheduler (docs/BENCHMARKS.md,
// "tenth session": issue slots ~40% busy). Here the output warpgroups form the chunk's C.B and
// scores while the state warpgroups form S_loc and take the chain, four warps per scheduler; the
// one hand-over between the roles inside a chunk is ss (bf16 S_in, Y_off's B operand),
// published by a named barrier. Every warpgroup keeps at most one half's accumulators and the
// state waits in f32 shared-memory slots, so 128 registers per thread hold them (the eleventh
// session's `roles11` gave one warpgroup both state halves and spilled). Measured against the
// lock-step form at head_dim 64: nano3 1x2048 46.2-46.7 us against 54.2-54.6, 1x4096 -19%
// (docs/BENCHMARKS.md, "fourteenth session").
// Every load of a stage (C, B and x by TMA, x as one 128-byte-swizzled atom read through an
// MN-major descriptor, and the dt rows) is a handful of instructions from single threads, issued
// in the chunk before: x copied by the state role's 256 threads after the end-of-chunk barrier
// put ~2K cycles per chunk on that role's path to ss (docs/BENCHMARKS.md, "sixteenth session":
// nano3 1x2048 46.0 -> 40.7 us).
// The products are ssm_scan_seq.cu's, issued in the same order into the same accumulators, so
// the exact-emulation cases (tests/ops/cases_ssd_mma_exact.cpp) pin this kernel too.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/cuda/dsmem_sm90.cuh"
#include "ops/cuda/ssm_scan_wg_tiles.cuh"
#include "ops/cuda/tma_map.h"

namespace strata::cuda {

namespace {

using namespace wgscan;
using scan::fused_scratch_of;
using scan::FusedScratch;

constexpr int kP = 64, kNT = kP / 8, kR = 4 * kNT;  // head_dim; accumulators of a 64 x P product
constexpr int kRoleThreads = 512;                   // 2 state + 2 output warpgroups
// Shared memory: two stages of {C, B swizzled, x (one swizzled atom), the dt rows} (the size of
// ssm_scan_seq.cu's stages),
// ss [P][N] cores, the state slots [NT][256] float4 (the inbox, with or without a cluster);
// + 1 KB for the atoms' 1024-byte alignment. 213 KB.
constexpr int kStageBytes = stage_bytes(kP);
constexpr uint32_t kXBytes = kQ * kP * sizeof(bf16);  // the x tile: one swizzled atom
constexpr int kSmem = 2 * kStageBytes + kP * kN * 2 + kP * kN * 4 + 1024;

// Barrier 0 spans the block; 1 and 2 are store_y's per-warpgroup barriers of the output role;
// 3 publishes ss: the state role arrives once it is written, the output role waits before Y_off;
// 4 (below) lets the state role's first warp load C's first atom over read y tiles.
constexpr int kWsPhases = 10;  // diagnostic trace entries per warpgroup
// Diagnostic global-timer stamps per block (ns, kTrace only): [0] entry, [1] after pdl_wait,
// [2] the output role's first stage landed, [3] the state role's first entering state taken,
// [4] the output role's loop end, [5] the state role's loop end.
constexpr int kWsStamps = 6;
__device__ __forceinline__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void block_sync() { asm volatile("bar.sync 0, 512;\n" ::: "memory"); }
__device__ __forceinline__ void ss_written() { asm volatile("bar.arrive 3, 512;\n" ::: "memory"); }
__device__ __forceinline__ void ss_wait() { asm volatile("bar.sync 3, 512;\n" ::: "memory"); }
// Barrier 4: the output warpgroups' y tiles of the chunk before were read (their first warps
// arrive), so the state role's first warp may load C's first atom over them.
__device__ __forceinline__ void y_tiles_read() {
  if ((threadIdx.x & 127) < 32) asm volatile("bar.arrive 4, 96;\n" ::: "memory");
}
__device__ __forceinline__ void y_tiles_read_wait() {
  asm volatile("bar.sync 4, 96;\n" ::: "memory");
}

// x rows len .. Q - 1 of a loaded x atom hold the next sequence (or zeros): cleared, so that its
// non-finite values cannot reach this one through the zero products of the masked scores and of
// the cleared B rows. The state role's 256 threads; the caller fences (generic -> async proxy)
// and synchronizes. A swizzle permutes pieces within a row only: row r is bytes [128 r, +128).
__device__ __forceinline__ void clear_x_rows_past(bf16* xs, int len) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = static_cast<int>(threadIdx.x) + 8 * len; i < 8 * kQ; i += kThreads)
    reinterpret_cast<uint4*>(xs)[i] = zero;
}

// grid S * Hm * cs (cs consecutive blocks per (sequence b, head h), a cluster when cs > 1),
// block kRoleThreads, kSmem bytes. Launch order and pdl as ssm_scan_seq.cu's kernel.
template <bool kCluster, bool kTrace>
__global__ void __launch_bounds__(kRoleThreads, 1)
    ws_scan_kernel(SsmLaunch p, FusedScratch fs, int* errors, long long* trace,
                   const __grid_constant__ CUtensorMap tm_c, const __grid_constant__ CUtensorMap tm_b,
                   const __grid_constant__ CUtensorMap tm_y,
                   const __grid_constant__ CUtensorMap tm_x, int y_tma, int early_rows) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_trigger();
  long long* stamps = kTrace ? trace + static_cast<int64_t>(gridDim.x) * 4 * kWsPhases +
                                   static_cast<int64_t>(blockIdx.x) * kWsStamps
                             : nullptr;
  if (kTrace && threadIdx.x == 0) stamps[0] = global_ns();
  constexpr uint32_t kStateBytes = kP * kN * 4;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ uint64_t full[2];   // mbarriers of the two stages' bulk loads
  __shared__ uint64_t received;  // mbarrier of the state sent by the previous block (cluster)
  const int cs = kCluster ? static_cast<int>(dsmem::size()) : 1;
  const int rank = kCluster ? static_cast<int>(dsmem::rank()) : 0;
  const int64_t Hm = p.heads, unit = blockIdx.x / cs;
  const int64_t b = unit / Hm, h = unit - b * Hm, g = h / (Hm / p.groups);
  const int l = static_cast<int>(threadIdx.x);
  const int role_wg = __shfl_sync(0xffffffffu, l >> 7, 0);  // warp-uniform
  const bool state_role = role_wg < 2;  // threads 0..255: the loads' and the inbox's indices
  const int q = role_wg & 1;            // state rows n, or chunk rows l, in [64 q, +64)
  const int warp = (l >> 5) & 3, lane = l & 31;
  const mma::Lane ln(lane);
  const int l0 = 64 * q;
  const int row = l0 + 16 * warp + ln.grp;  // this thread's rows: n (state) or la (output)

  unsigned char* smem = smem_raw + ((1024u - (tma::smem_u32(smem_raw) & 1023u)) & 1023u);
  const auto cs_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * kStageBytes); };
  const auto bs_of = [&](int st) { return cs_of(st) + kQ * kN; };
  const auto xs_of = [&](int st) { return cs_of(st) + 2 * kQ * kN; };
  const auto dt_of = [&](int st) { return reinterpret_cast<float*>(xs_of(st) + kQ * kP); };
  bf16* ss = reinterpret_cast<bf16*>(smem + 2 * kStageBytes);  // [P][N] cores
  float4* inbox = reinterpret_cast<float4*>(ss + kP * kN);     // [NT][kThreads] f32 state
  const int32_t* table = fs.ch.table;                          // [nc][seq, t0, len]

  if (l == 0) {
    tma::bar_init(&full[0]);
    tma::bar_init(&full[1]);
    if (kCluster) {
      tma::bar_init(&received);
      tma::bar_arrive_expect(&received, kStateBytes);
    }
  }
  if (kCluster)
    dsmem::sync();
  else
    __syncthreads();

  // The sequence's rows and loads as in ssm_scan_seq.cu (its comments say why each is where it
  // is); here x arrives by TMA too, and every load is issued by single threads.
  const bool early = early_rows != 0;
  int32_t first = 0, count = 0, seq_start = 0, seq_len = 0;
  if (early) {
    const BlockSeq s = block_seq_chunks(p, fs.ch.max_chunks, lane, b);
    first = s.first;
    count = s.count;
    seq_start = s.start;
    seq_len = s.len;
  }
  // Chunk i's loads into stage i & 1 for the first two chunks (i < 2), by thread 0: C, B and x
  // (one swizzled atom, the head's 64 columns; rows past the tensor arrive as zeros, rows of a
  // following sequence are cleared once landed) by TMA, and the dt rows.
  const auto issue = [&](int i, int64_t t0, bool with_dt) {
    const int k = rank + i * cs;
    if (k < count && l == 0) {
      const int64_t c = first + k;
      const int st = i & 1;
      load_chunk_cb(cs_of(st), bs_of(st), g, t0, &tm_c, &tm_b, &full[st], kXBytes);
      tma::load_2d(xs_of(st), &tm_x, static_cast<int>(h * kP), static_cast<int>(t0), &full[st]);
      if (with_dt) load_chunk_dt(dt_of(st), fs, c, h, Hm, &full[st]);
    }
  };
  // The same loads for chunk i >= 2, spread over the first lanes of state warpgroup 1's four
  // warps, in the chunk before (below): one thread issuing them all took ~0.4K cycles on the
  // state role's path to ss. C's first atom is left to load_chunk_c_first_atom, once the y
  // tiles of chunk i - 2 there have been read.
  const auto issue_spread = [&](int i, int64_t t0) {
    const int k = rank + i * cs, w = (l >> 5) & 3;
    if (k < count && (l >> 7) == 1 && (l & 31) == 0) {
      const int st = i & 1, col = static_cast<int>(g * kN), tok = static_cast<int>(t0);
      if (w == 0) {
        tma::bar_arrive_expect(&full[st], kTmaBytes + kDtRowBytes + kXBytes);
        tma::load_2d(cs_of(st) + kAtom, &tm_c, col + 64, tok, &full[st]);
      } else if (w == 1) {
        tma::load_2d(bs_of(st), &tm_b, col, tok, &full[st]);
      } else if (w == 2) {
        tma::load_2d(bs_of(st) + kAtom, &tm_b, col + 64, tok, &full[st]);
      } else {
        tma::load_2d(xs_of(st), &tm_x, static_cast<int>(h * kP), tok, &full[st]);
        load_chunk_dt(dt_of(st), fs, first + k, h, Hm, &full[st]);
      }
    }
  };
  const auto load_dt = [&](int i) {
    const int k = rank + i * cs;
    if (k < count && l == 0) load_chunk_dt(dt_of(i & 1), fs, first + k, h, Hm, &full[i & 1]);
  };
  const auto early_row = [&](int i, int32_t& t0, int32_t& len) {
    const int k = rank + i * cs;
    t0 = seq_start + k * kQ;
    len = min(kQ, seq_len - k * kQ);
  };
  int32_t t0_cur = 0, t0_next = 0, len_cur = 0, len_next = 0;
  if (early) {
    early_row(0, t0_cur, len_cur);
    early_row(1, t0_next, len_next);
    issue(0, t0_cur, false);  // the second chunk's loads once these landed (below)
  }
  const int64_t PN = static_cast<int64_t>(kP) * kN;
  int32_t has_initial = 0;
  bool slot_ok = false, from_slot = false;
  float* slot_state = p.states;
  const auto read_slot = [&] {
    const SeqSlot s = read_seq_slot(p, b, h, PN);
    has_initial = s.has_initial;
    slot_ok = s.ok;
    slot_state = s.state;
    from_slot = slot_ok && has_initial != 0 && rank == 0;
  };
  float s_in[kR];  // the state role's: S^T rows row, row + 8 in S_loc^T's accumulator layout
  const auto load_initial = [&] {
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      const int pp = 8 * j + 2 * ln.tig;
      s_in[4 * j + 0] = s_in[4 * j + 1] = s_in[4 * j + 2] = s_in[4 * j + 3] = 0.f;
      if (from_slot) load_state_quad(s_in + 4 * j, slot_state, pp, row);
    }
  };
  if (early && state_role) {
    read_slot();
    load_initial();
  }
  const float Dh = state_role ? 0.f : load_param(p.D.p, p.D.dt == DType::BF16, h);

  pdl_wait();
  if (kTrace && l == 0) stamps[1] = global_ns();
  if (!early) {
    first = fs.ch.seq_chunks[2 * b];
    count = __shfl_sync(0xffffffffu, fs.ch.seq_chunks[2 * b + 1], 0);
    if (state_role) read_slot();
  }
  if (!slot_ok && state_role && h == 0 && rank == 0 && l == 0) atomicAdd(errors, 1);
  if (count == 0) {  // only the state role has read the slot
    if (slot_ok && has_initial == 0 && rank == 0)
      for (int64_t e = l; e < PN; e += kThreads)
        slot_state[e] = 0.f;
    return;
  }
  const auto row_of = [&](int i, int32_t& t0, int32_t& len) {
    const int k = rank + i * cs;
    const int64_t c = first + (k < count ? k : 0);
    t0 = table[3 * c + 1];
    len = table[3 * c + 2];
  };
  if (early) {
    load_dt(0);
  } else {
    row_of(0, t0_cur, len_cur);
    row_of(1, t0_next, len_next);
    issue(0, t0_cur, true);
    if (state_role) load_initial();
  }
  __syncthreads();

  // Diagnostic (kTrace: STRATA_SSD_TRACE, eager calls): cycles per phase summed over the block's
  // chunks by each warpgroup's first thread, in shared memory (registers are the scarce part);
  // report_ws_trace names the phases; [kWsPhases - 1] counts the chunks.
  __shared__ long long ph[4][kWsPhases];
  if (kTrace && l < 4 * kWsPhases) ph[l / kWsPhases][l % kWsPhases] = 0;
  if (kTrace) __syncthreads();
  long long tick = kTrace ? clock64() : 0;
  const bool tracer = kTrace && (l & 127) == 0;
  const auto lap = [&](int k) {
    if (tracer) {
      const long long now = clock64();
      ph[role_wg][k] += now - tick;
      tick = now;
    }
  };

  if (state_role) {
    // The state lives in the inbox between chunks, in this thread's slots [j][l] (S_loc^T's
    // accumulator layout, as a float4 per 8-column group j): sent there by the block of the
    // previous chunk (cluster), or written back by this block (cs = 1), or the entering state
    // for the sequence's first chunk. So S_loc's accumulators and fragments are the only large
    // live ranges of the state role, and 128 registers hold them.
    const uint32_t to = static_cast<uint32_t>((rank + 1) % cs);  // the next chunk's block
    if (rank == 0)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
        inbox[j * kThreads + l] =
            make_float4(s_in[4 * j], s_in[4 * j + 1], s_in[4 * j + 2], s_in[4 * j + 3]);
    for (int i = 0; rank + i * cs < count; ++i) {
      const int k = rank + i * cs, st = i & 1;
      const int len = __shfl_sync(0xffffffffu, len_cur, 0);
      int32_t t0_after, len_after;
      row_of(i + 2, t0_after, len_after);
      bf16* bs = bs_of(st);
      bf16* xs = xs_of(st);
      const float* cum = dt_of(st);
      const float* ws = cum + 2 * kQ;
      lap(kWsPhases - 2);
      tma::bar_wait(&full[st], (i >> 1) & 1);
      // The second chunk's loads once the first chunk's landed: the first chunk's bytes then
      // take the whole bandwidth while every block fills at once.
      if (i == 0) issue(1, t0_next, true);
      if (len < kQ) {  // B and x rows past the sequence: zeros, for both roles' products
        clear_b_rows_past(bs, len);
        clear_x_rows_past(xs, len);
        wg::fence_proxy_async();
        block_sync();
      }
      lap(0);
      // S_loc^T = (B w)^T . x for state rows [64 q, +64), then the entering state.
      // In two halves of k-steps through the same 16 fragment registers (the first half waited
      // for): the whole set beside the accumulators did not fit 128 registers.
      float own[kR];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint32_t a[kQ / 32][4];
        if (half == 1) {
          wg::wait_all();
          wg::fence_regs(own);
        }
        s_loc_fragments<kQ / 32>(a, bs, ws, q, warp, lane, half * kQ / 32);
        wg::wgmma_fence();
#pragma unroll
        for (int t = 0; t < kQ / 32; ++t)
          wg::mma_rs_bmn(own, a[t], x_desc_of<kP, true>(xs, half * kQ / 32 + t),
                         half + t > 0 ? 1 : 0);
        wg::commit();
      }
      // The next chunk's loads into the other stage (free since the last chunk's end barrier,
      // but for C's first atom, below), here and not after this chunk's end barrier, where
      // they delayed the state role's next S_loc and so ss.
      if (i >= 1) issue_spread(i + 1, t0_next);
      // C's first atom of the next chunk once the output role's y stores of the chunk before
      // this one have read it (the loads of chunks 0 and 1 took it whole).
      if (l < 32) {
        y_tiles_read_wait();
        if (l == 0 && i >= 1 && rank + (i + 1) * cs < count)
          load_chunk_c_first_atom(cs_of((i + 1) & 1), g, t0_next, &tm_c, &full[(i + 1) & 1]);
      }
      lap(1);
      if (kCluster && k > 0) {
        tma::bar_wait(&received, (rank == 0 ? i - 1 : i) & 1);  // the k > 0 chunks before
        if (l == 0) tma::bar_arrive_expect(&received, kStateBytes);  // the next state sent here
      }
      // bf16(S_in) into ss for the output role's Y_off (ss is free: the output role's previous
      // Y_off completed before the last chunk's end barrier).
      lap(2);
      if (kTrace && l == 0 && i == 0) stamps[3] = global_ns();
      store_ss_trans<kNT>(ss, inbox, row - ln.grp, lane, l);
      wg::fence_proxy_async();
      ss_written();
      lap(3);
      const float decay = expf(cum[len - 1]);
      wg::wait_all();
      wg::fence_regs(own);
      lap(7);
      // S_out = exp(cum_last) S_in + S_loc, to the block of the next chunk, or back into the
      // slots (cs = 1), or after the sequence's last chunk to the Mamba slot.
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const float4 v = inbox[j * kThreads + l];
        const float4 o = make_float4(decay * v.x + own[4 * j], decay * v.y + own[4 * j + 1],
                                     decay * v.z + own[4 * j + 2], decay * v.w + own[4 * j + 3]);
        if (k + 1 < count) {
          if (kCluster)  // mapped here: the addresses held across the chunk spilled
            dsmem::store_async(dsmem::map(inbox + j * kThreads + l, to), o,
                               dsmem::map(&received, to));
          else
            inbox[j * kThreads + l] = o;
        } else if (slot_ok) {
          const float r[4] = {o.x, o.y, o.z, o.w};
          store_state_quad(slot_state, r, 8 * j + 2 * ln.tig, row);
        }
      }
      // End of the chunk: every role is done with this stage, which takes the chunk after next
      // (issued in the next chunk).
      lap(4);
      block_sync();
      lap(5);
      if (tracer) ++ph[role_wg][kWsPhases - 1];
      len_cur = len_next;
      len_next = len_after;
      t0_next = t0_after;
    }
    if (kTrace && l == 0) stamps[5] = global_ns();
  } else {
    const int la = row, lb = la + 8;
    for (int i = 0; rank + i * cs < count; ++i) {
      const int st = i & 1;
      const int64_t t0 = t0_cur;
      const int len = __shfl_sync(0xffffffffu, len_cur, 0);
      int32_t t0_after, len_after;
      row_of(i + 2, t0_after, len_after);
      bf16* cs_t = cs_of(st);
      const bf16* bs = bs_of(st);
      const bf16* xs = xs_of(st);
      const float* cum = dt_of(st);
      const float* dts = cum + kQ;
      lap(kWsPhases - 2);
      tma::bar_wait(&full[st], (i >> 1) & 1);
      if (kTrace && l == 256 && i == 0) stamps[2] = global_ns();
      if (len < kQ) block_sync();  // the state role clears B's and x's rows past the sequence
      lap(0);
      // The first C.B block and its scores, then warpgroup 1's diagonal C.B block, while the
      // state role forms S_loc and the entering state.
      float cb[32], acc[kR];
      uint32_t a0[4][4];
      wg::wgmma_fence();
      issue_cb(cb, cs_t, bs, l0, 0);
      wg::commit();
      const float cum_a = cum[la], cum_b = cum[lb];
      wg::wait_all();
      wg::fence_regs(cb);
      // The y tile this warpgroup stored from the next chunk's stage (its chunk before this one)
      // has long been read by now: the state role's first warp then loads the next chunk's C
      // first atom there. Waited here, not before the chunk's end, the read is off the chunk's
      // path.
      if ((l & 127) == 0) tma::wait_store_read();
      y_tiles_read();
      lap(1);
      if (q == 1)  // rows 64.. against positions 0..63: below the diagonal, no mask
        decayed_scores<false>(a0, cb, 0, cum, dts, la, lb, cum_a, cum_b, ln.tig);
      else
        decayed_scores(a0, cb, 0, cum, dts, la, lb, cum_a, cum_b, ln.tig);
      const bool diag_block = q == 1 && 64 < len;  // warp-uniform
      if (diag_block) {
        wg::fence_regs(cb);
        wg::wgmma_fence();
        issue_cb(cb, cs_t, bs, 64, 64);
        wg::commit();
      }
      lap(2);
      // Y_off = C_l . S_in[p] once ss holds the entering state.
      ss_wait();
      lap(3);
      wg::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk)
        wg::mma_ss(acc, sw_desc(cs_t, l0, kk), kmajor(ss + core_off(0, 16 * kk, kNC)),
                   kk > 0 ? 1 : 0);
      wg::commit();
      wg::wait_all();
      wg::fence_regs(acc);
      wg::fence_regs(cb);
      const float ea = expf(cum_a), eb = expf(cum_b);
      scale_rows<kNT>(acc, ea, eb);
      lap(4);
      y_diag_overlapped<kNT, true>(acc, a0, cb, diag_block, xs, cum, dts, la, lb, cum_a, cum_b,
                                   lane);
      lap(5);
      if (y_tma != 0 && len == kQ)
        store_y_tma(acc, &tm_y, xs, cs_t, t0, h, Dh, q, la, lb, lane);  // read: next C.B
      else if (l0 < len)
        store_y<kNT, true>(acc, p, xs, cs_t, t0, len, h, Dh, q, la, lb, lane);
      lap(6);
      wg::fence_proxy_async();  // the y tile's st.shared before the stage's next loads
      block_sync();
      lap(7);
      if (tracer) ++ph[role_wg][kWsPhases - 1];
      t0_cur = t0_next;
      len_cur = len_next;
      t0_next = t0_after;
      len_next = len_after;
    }
    if (kTrace && l == 256) stamps[4] = global_ns();
    if ((l & 127) == 0) tma::wait_store_read();  // the last y tile read before the block exits
  }
  if (tracer)
    for (int k = 0; k < kWsPhases; ++k)
      trace[(static_cast<int64_t>(blockIdx.x) * 4 + role_wg) * kWsPhases + k] = ph[role_wg][k];
  if (kCluster) dsmem::sync();
#else
  __trap();  // built without sm_90a: supports() refuses every device this could run on
#endif
}

// Diagnostic (STRATA_SSD_TRACE set, eager calls only): the mean cycles per chunk of each phase
// over the blocks that took chunks, per warpgroup, on stderr.
void report_ws_trace(long long* trace, int64_t blocks, int cs, cudaStream_t st) {
  std::vector<long long> h(static_cast<size_t>(blocks * (4 * kWsPhases + kWsStamps)));
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(h.data(), trace, h.size() * sizeof(long long), cudaMemcpyDeviceToHost, st));
  STRATA_CUDA_CHECK(cudaFreeAsync(trace, st));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
  static const char* state_names[] = {"stage wait", "S_loc issue", "received", "ss written",
                                      "S_out+send", "end barrier", "", "S_loc wait",
                                      "loop top"};
  static const char* output_names[] = {"stage wait", "C.B0", "scores0+C.B1 issue", "ss wait",
                                       "Y_off+scale", "Y_diag", "y store", "end barrier",
                                       "loop top"};
  for (int w = 0; w < 4; ++w) {
    double sum[kWsPhases] = {};
    for (int64_t b = 0; b < blocks; ++b)
      for (int k = 0; k < kWsPhases; ++k)
        sum[k] += static_cast<double>(h[(b * 4 + w) * kWsPhases + k]);
    if (sum[kWsPhases - 1] == 0) continue;
    const char** names = w < 2 ? state_names : output_names;
    std::fprintf(stderr, "ssd_ws trace wg%d (%s) chunks %.0f, cycles per chunk:", w,
                 w < 2 ? "state" : "output", sum[kWsPhases - 1]);
    for (int k = 0; k < kWsPhases - 1; ++k)
      if (names[k][0] != 0) std::fprintf(stderr, " %s %.0f", names[k], sum[k] / sum[kWsPhases - 1]);
    std::fprintf(stderr, "\n");
  }
  // The stamps against the earliest entry, in us: mean (min, max) over the blocks, per rank.
  const long long* stamp = h.data() + blocks * 4 * kWsPhases;
  long long t0 = stamp[0];
  for (int64_t b = 0; b < blocks; ++b) t0 = std::min(t0, stamp[b * kWsStamps]);
  static const char* stamp_names[] = {"entry", "pdl_wait done", "out: stage 0 landed",
                                      "state: S_in taken", "out: loop end", "state: loop end"};
  for (int r = 0; r < cs; ++r) {
    std::fprintf(stderr, "ssd_ws stamps rank %d (us from the first entry):", r);
    for (int k = 0; k < kWsStamps; ++k) {
      double sum = 0, lo = 1e30, hi = -1e30;
      int n = 0;
      for (int64_t b = r; b < blocks; b += cs) {
        const long long v = stamp[b * kWsStamps + k];
        if (v == 0) continue;
        const double us = static_cast<double>(v - t0) * 1e-3;
        sum += us;
        lo = std::min(lo, us);
        hi = std::max(hi, us);
        ++n;
      }
      if (n > 0) std::fprintf(stderr, " | %s %.2f (%.2f, %.2f)", stamp_names[k], sum / n, lo, hi);
    }
    std::fprintf(stderr, "\n");
  }
}

// Blocks per (sequence, head): as many as fit the SMs at one block each, up to 4.
int ws_cluster_size(const SsmLaunch& p) {
  const int64_t units = p.slots.n * p.heads, sms = ssm_scan_sm_count();
  return units * 4 <= sms ? 4 : units * 2 <= sms ? 2 : 1;
}

template <bool kCluster>
void launch_ws_kernel(const SsmLaunch& p, const FusedScratch& fs, int* index_errors, int cs,
                      bool early, cudaStream_t st) {
  constexpr int smem = kSmem;
  static_assert(smem <= 227 * 1024, "the stages, ss and the inbox fit one block");
  static std::atomic<uint64_t> attr{0};
  scan::allow_smem(ws_scan_kernel<kCluster, false>, smem, attr);
  static std::atomic<uint64_t> attr_trace{0};
  scan::allow_smem(ws_scan_kernel<kCluster, true>, smem, attr_trace);
  const CUtensorMap tm_c = tma_map_bf16_sw128(p.C, kQ), tm_b = tma_map_bf16_sw128(p.B, kQ);
  const CUtensorMap tm_x = tma_map_bf16_sw128(p.x, kQ);
  const bool y_tma = (reinterpret_cast<uintptr_t>(p.out.p) & 15u) == 0 && p.out.ld % 8 == 0;
  const CUtensorMap tm_y = y_tma ? tma_map_bf16_sw128(p.out, 64) : tm_c;  // tm_c: unused
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.slots.n * p.heads * cs));
  cfg.blockDim = dim3(kRoleThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;  // pdl.cuh
  at[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = static_cast<unsigned>(cs);
  at[1].val.clusterDim.y = 1;
  at[1].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = kCluster ? 2 : 1;
  const int64_t blocks = cfg.gridDim.x;
  long long* trace = trace_buffer(blocks * (4 * kWsPhases + kWsStamps), st);
  STRATA_CUDA_CHECK(cudaLaunchKernelEx(
      &cfg, trace != nullptr ? ws_scan_kernel<kCluster, true> : ws_scan_kernel<kCluster, false>,
      p, fs, index_errors, trace, tm_c, tm_b, tm_y, tm_x, y_tma ? 1 : 0, early ? 1 : 0));
  if (trace != nullptr) report_ws_trace(trace, blocks, cs, st);
}

}  // namespace

void launch_ssm_scan_ws(const SsmLaunch& p, int* index_errors, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (wg_scan_nt(p, "ssm_scan_ws") != kNT) STRATA_CUDA_FAIL("ssm_scan_ws takes head_dim 64 only");
  const FusedScratch fs = fused_scratch_of(p);
  const int cs = ws_cluster_size(p);
  const bool early =
      table_dt_rows_step(p, fs) && p.slots.n * p.heads * cs <= ssm_scan_sm_count();
  if (!start_wg_scan(p, fs, index_errors, st, early)) return;
  if (cs > 1) {
    launch_ws_kernel<true>(p, fs, index_errors, cs, early, st);
    mark_scan_stage("wgmma (roles, cluster)");
  } else {
    launch_ws_kernel<false>(p, fs, index_errors, 1, early, st);
    mark_scan_stage("wgmma (roles)");
  }
}

}  // namespace strata::cuda
