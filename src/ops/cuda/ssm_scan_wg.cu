// Mamba2 chunked scan (SSD) for bf16 activations in one pass on warpgroup tensor-core products
// (sm_90a wgmma): the structure of ssm_scan_fused.cu's chain (one block per (chunk, head),
// taken by ticket in chunk-major order; the state entering a chunk handed over from its
// predecessor through an L2-resident f32 slot and a flag), with every product a wgmma of one
// warpgroup (64 rows) instead of mma.sync tiles of one warp (16 rows): one instruction per
// 64 x P x 16 product with its operands read from shared memory by descriptor, where the warp
// form issued P / 2 mma.sync (four warps) plus their fragment loads. Why: the mma.sync chain
// issues ~3.7K instructions per warp and is latency-bound at 2 blocks per SM (docs/BENCHMARKS.md,
// "Prefill scan, round 5"). Measured ("round 6"): as fast as the chain on one sequence, 3-15%
// faster on several; ~3.2K instructions per warp remain (staging, cumsum, scores, hand-over,
// epilogue), issued at the same low rate. Round 8 (docs/BENCHMARKS.md, seventh session): the
// wgmma conditions made warp-uniform (ptxas had serialized every wgmma), the dt loads ahead of the
// staging copies, the cumsum in one warp beside the copies, one release per hand-over, y stored
// through shared memory: 6-12% faster. STRATA_SSD_TRACE=1 prints each phase's cycles per block
// (eager calls). Shapes: chunk 128, state 128, head_dim 64 or 80 (every Nemotron-H member), x, B
// and C views 16-byte aligned (ssm_scan_wg_shape, in supports).
//
// Same math and rounding points as ssm_scan_mma.cu (its header; the exact-emulation cases of
// tests/ops/cases_ssd_mma_exact.cpp run this kernel too): bf16(w_s B_s[n]) rounded in the A
// fragment of the chunk state, S_in rounded to bf16 once, the scores rounded into the A
// fragments of Y_diag, f32 accumulation everywhere, the f32 state passing unchanged. Within a
// product the f32 accumulation order is the tensor core's (the harness bounds it, it does not
// fix it).
//
// Block: 256 threads = two warpgroups. Warpgroup q takes the state rows n in [64 q, 64 q + 64)
// of S_loc^T = (B w)^T . x, and the output rows l in [64 q, 64 q + 64) of
//   Y = exp(cum_l) C . S_in^T  +  scores . x,   scores = bf16(C.B decayed), causal.
// C.B is formed per 64 x 64 block of (l, s) on or below the diagonal (q + 1 blocks), turned
// into the A fragments of Y_diag in registers (the accumulator and A layouts coincide).
// C and B [token][n] (K-major A and B operands of C.B, Y_off and S_loc's ldmatrix) arrive by TMA
// in the 128-byte swizzle (tma_sm90.cuh: four boxes issued by one thread, 64 KB, instead of
// 4,096 16-byte copies by 224 threads); x [s][p] (B operand, MN-major) is staged in 8 x 8 core
// matrices (wgmma_bf16.cuh) by 16-byte cp.async copies, and S_in [p][n] (K-major B of Y_off) is
// written there from registers.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/cuda/ssm_scan_wg_tiles.cuh"
#include "ops/cuda/tma_map.h"

namespace strata::cuda {

namespace {

using scan::clear_empty_sequences;
using scan::discard_l2_line;
using scan::fused_scratch_of;
using scan::FusedScratch;
using scan::load_acquire;
using scan::scale_pair;
using scan::store_release;
using namespace wgscan;

constexpr int kStamps = 16;  // diagnostic trace: clock64 per phase, [12] / [13] globaltimer
#define STAMP(i)               \
  do {                         \
    if (tr) tr[i] = clock64(); \
  } while (0)

int wg_smem(int P) {
  return (2 * kQ * kN + kQ * P + P * kN) * static_cast<int>(sizeof(bf16)) +
         3 * kQ * static_cast<int>(sizeof(float)) + 1024;
}

// grid nc * Hm (one block per (chunk, head), taken by ticket), block kThreads.
template <int NT>  // P = 8 NT
__global__ void __launch_bounds__(kThreads, 2)
    wg_scan_kernel(SsmLaunch p, FusedScratch fs, int* errors, long long* trace,
                   const __grid_constant__ CUtensorMap tm_c,
                   const __grid_constant__ CUtensorMap tm_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Launched as a programmatic dependent of the table / dt rows kernel (start_wg_scan).
  pdl_enter();
  constexpr int P = 8 * NT, R = 4 * NT;  // R: accumulator registers of a 64 x P product
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int ticket;
  __shared__ uint64_t staged;  // mbarrier of the TMA loads of C and B
  const long long t_entry = clock64();
  unsigned long long g_entry = 0;
  if (trace != nullptr) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_entry));
  if (threadIdx.x == 0) ticket = atomicAdd(fs.ticket, 1);
  __syncthreads();
  long long* tr = (trace != nullptr && (threadIdx.x & 127) == 0)
                      ? trace + (static_cast<int64_t>(ticket) * 2 + (threadIdx.x >> 7)) * kStamps
                      : nullptr;
  if (tr) {
    tr[0] = t_entry;
    tr[12] = static_cast<long long>(g_entry);
  }
  STAMP(1);
  // Values every thread of a warp shares go through a shuffle: ptxas then knows them warp-uniform
  // and keeps the wgmma under conditions on them (l0 < len, the causal loop) pipelined instead of
  // serializing every wgmma of the kernel (its warning C7518).
  const int tk = __shfl_sync(0xffffffffu, ticket, 0);
  const int64_t Hm = p.heads, c = tk / Hm, h = tk - c * Hm, g = h / (Hm / p.groups);
  if (c == 0) clear_empty_sequences<P>(p, fs.ch, h, errors);
  const int32_t* row = fs.ch.table + 3 * c;  // sequence, first token, length: one round trip
  const int b = row[0];
  const int64_t t0 = row[1];
  const int len = __shfl_sync(0xffffffffu, row[2], 0);
  if (len == 0) return;  // past every sequence: no block waits on it
  const int l = static_cast<int>(threadIdx.x);

  unsigned char* smem = smem_raw + ((1024u - (tma::smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16* cs = reinterpret_cast<bf16*>(smem);            // [2][Q][64] swizzled: the chunk's C rows
  bf16* bs = cs + kQ * kN;                             // [2][Q][64] swizzled: its B rows
  bf16* xs = bs + kQ * kN;                             // [Q][P] cores: x_s[p]
  bf16* ss = xs + kQ * P;                              // [P][N] cores: S_in (bf16)
  float* cum = reinterpret_cast<float*>(ss + P * kN);  // [Q]
  float* dts = cum + kQ;                               // [Q]
  float* ws = dts + kQ;                                // [Q]: exp(cum_last - cum_s) dt_s
  // C and B by TMA and the chunk's cum / dt / w rows (dt_rows_kernel's) by one bulk copy, all
  // issued by one thread (rows past the tensor arrive as zeros, rows of a following sequence
  // are cleared below); x by the block's 16-byte copies.
  if (threadIdx.x == 0) {
    tma::bar_init(&staged);
    load_chunk_tiles(cs, bs, cum, fs, c, h, Hm, g, t0, &tm_c, &tm_b, &staged);
  }
  // Every read of x precedes the first barrier and every write of y follows the last: out may
  // alias x (other blocks touch other rows or heads).
  stage_core<P>(xs, static_cast<const bf16*>(p.x.p), p.x.ld, t0, len, h * P);
  scan::cp_async_commit();
  STAMP(2);
  const int32_t first = fs.ch.seq_chunks[2 * b], count = fs.ch.seq_chunks[2 * b + 1];
  const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
  const int32_t has_initial = static_cast<const int32_t*>(p.has_initial.p)[b];
  STAMP(3);
  scan::cp_async_wait_all();
  wg::fence_proxy_async();
  __syncthreads();            // x staged; the mbarrier initialized
  tma::bar_wait(&staged, 0);  // C, B and the dt rows landed
  if (len < kQ) {             // B rows past the chunk hold the next sequence: zeros (w_s = 0 there)
    clear_b_rows_past(bs, len);
    wg::fence_proxy_async();
    __syncthreads();
  }
  STAMP(4);
  const float last = cum[len - 1];
  const bool is_first = c == first, is_last = c == first + count - 1;
  const bool slot_ok = slot >= 0 && slot < p.num_slots;
  if (is_first && !slot_ok && h == 0 && threadIdx.x == 0) atomicAdd(errors, 1);

  const int q = __shfl_sync(0xffffffffu, l >> 7, 0);  // warpgroup (warp-uniform)
  const int warp = (l >> 5) & 3, lane = l & 31;       // its warp, lane
  const mma::Lane ln(lane);

  // S_loc^T rows n in [64 q, +64): A[n][s] = bf16(w_s B_s[n]) from registers (ldmatrix .trans
  // of the [s][n] cores, scaled), B[s][p] = x_s[p]. Rows past the chunk have B = 0 and w = 0.
  float own[R];
  {
    uint32_t a[kQ / 16][4];
    s_loc_fragments(a, bs, ws, q, warp, lane);
#pragma unroll
    for (int k = 0; k < R; ++k)
      own[k] = 0.f;
    wg::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kQ / 16; ++ks)
      wg::mma_rs_bmn(own, a[ks], x_desc<P>(xs, ks), 1);
    wg::commit();
    wg::wait_all();
    wg::fence_regs(own);
  }
  STAMP(5);

  // C.B of the first 64 positions for this warpgroup's output rows (l0 ..), issued before the
  // hand-over (it reads only C and B) and waited for with Y_off: its latency hides behind the
  // wait on the predecessor (measured: -0.2 to -1.2% in 9 of 10 bench-kernels rows, twice).
  const int l0 = 64 * q;
  float cb[32];
#pragma unroll
  for (int k = 0; k < 32; ++k)
    cb[k] = 0.f;
  // Issued even by a warpgroup with no rows in the chunk (its C rows are the zero fill): a
  // wgmma under a condition makes ptxas wait for it where the branches join (warning C7517).
  {
    wg::wgmma_fence();
    issue_cb(cb, cs, bs, l0, 0);
    wg::commit();
  }
  STAMP(6);

  // The state entering the chunk: the slot's (or zero) for a sequence's first chunk, else the
  // predecessor's inclusive state, waited for. S_out = exp(cum_last) S_in + S_loc goes to the
  // successor (or the slot after the last chunk). The hand-over slot holds float4 number
  // j * kThreads + thread: this thread's accumulator values of column group j.
  const int64_t PN = static_cast<int64_t>(P) * kN;
  const float decay = expf(last);
  if (!is_first) {
    if (threadIdx.x == 0)
      while (load_acquire(fs.flags + (c - 1) * Hm + h) != 2)
        __nanosleep(32);
    __syncthreads();
  }
  STAMP(7);
  const bool from_slot = is_first && slot_ok && has_initial != 0;
  float* slot_state = p.states + (static_cast<int64_t>(slot_ok ? slot : 0) * Hm + h) * PN;
  const int64_t pred = is_first ? c : c - 1;  // read only when not the first
  const float4* in = reinterpret_cast<const float4*>(fs.carried + (pred * Hm + h) * PN);
  float4* out = reinterpret_cast<float4*>(fs.carried + (c * Hm + h) * PN);
  {
    const int n = 64 * q + 16 * warp + ln.grp;  // rows n, n + 8 of S^T; columns pp, pp + 1
    // Every load of the entering state is issued before any store: the stores below (to the
    // hand-over array or the slot) may alias the loads as far as the compiler knows, so loads
    // interleaved with them would take one memory latency each (NT of them on the chain's
    // critical path; measured: ~6 us per hand-over at 2,048 tokens, see docs/BENCHMARKS.md).
    float r[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig, f = j * kThreads + l;
      r[j][0] = r[j][1] = r[j][2] = r[j][3] = 0.f;
      if (!is_first) {
        const float4 v = __ldcg(in + f);
        r[j][0] = v.x;
        r[j][1] = v.y;
        r[j][2] = v.z;
        r[j][3] = v.w;
      } else if (from_slot) {
        load_state_quad(r[j], slot_state, pp, n);
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int pp = 8 * j + 2 * ln.tig, f = j * kThreads + l;
      store_ss_quad(ss, r[j], pp, n);
      float o[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o[k] = decay * r[j][k] + own[4 * j + k];
      if (!is_last) {
        __stcg(out + f, make_float4(o[0], o[1], o[2], o[3]));
      } else if (slot_ok) {
        store_state_quad(slot_state, o, pp, n);
      }
    }
    // This block is the only reader of its predecessor's state and has used it (the values
    // above depend on the loads): drop those lines from L2 unwritten.
    if (!is_first && (lane & 7) == 0) {
#pragma unroll
      for (int j = 0; j < NT; ++j)
        discard_l2_line(in + j * kThreads + l);
    }
  }
  wg::fence_proxy_async();  // S_in written by st.shared, read by the products below
  __syncthreads();          // S_in staged; S_out stored
  // The barrier orders every thread's S_out stores before thread 0's release at gpu scope (a
  // release is cumulative): one release instead of a fence per thread on the chain's path.
  if (!is_last && threadIdx.x == 0) store_release(fs.flags + c * Hm + h, 2);
  STAMP(8);

  // Outputs of rows l in [64 q, +64); a warpgroup with no rows in the chunk computes them anyway
  // and stores none (returning here would make ptxas wait for the early C.B at the branch).
  const int la = l0 + 16 * warp + ln.grp, lb = la + 8;  // this thread's two rows
  float acc[R];
#pragma unroll
  for (int k = 0; k < R; ++k)
    acc[k] = 0.f;
  // Y_off before the decay: C_l . S_in[p] over the state columns (A = C [l][n], B = S_in [p][n]).
  wg::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
    wg::mma_ss(acc, sw_desc(cs, l0, kk), kmajor(ss + core_off(0, 16 * kk, kNC)), 1);
  wg::commit();
  wg::wait_all();
  wg::fence_regs(acc);
  wg::fence_regs(cb);
  STAMP(9);
  const float cum_a = cum[la], cum_b = cum[lb];
  const float ea = expf(cum_a), eb = expf(cum_b);
  scale_rows<NT>(acc, ea, eb);

  // Y_diag per 64-position block up to the diagonal one (the first C.B block issued above).
  y_diag<NT>(acc, cb, cs, bs, xs, cum, dts, len, q, la, lb, cum_a, cum_b, lane);

  STAMP(10);
  // y = bf16(Y_off + Y_diag + D x).
  // (D is read here: loaded early, it would hold a register through the block; 128 is the limit.)
  store_y<NT>(acc, p, xs, cs, t0, len, h, load_param(p.D.p, p.D.dt == DType::BF16, h), q, la, lb,
              lane);
  STAMP(11);
  if (tr) {
    unsigned long long g_exit;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_exit));
    tr[13] = static_cast<long long>(g_exit);
    tr[14] = len;
    tr[15] = c;
  }
#else
  __trap();  // built without sm_90a: supports() refuses every device this could run on
#endif
}

// Diagnostic (STRATA_SSD_TRACE set, eager calls only): per-phase clocks of every block's two
// warpgroups, summarized on stderr: the mean cycles of each phase, the mean block time, the
// kernel's span and the mean number of blocks in flight.
void report_trace(long long* trace, int64_t blocks, int64_t heads, cudaStream_t st) {
  std::vector<long long> h(static_cast<size_t>(blocks * 2 * kStamps));
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(h.data(), trace, h.size() * sizeof(long long), cudaMemcpyDeviceToHost, st));
  STRATA_CUDA_CHECK(cudaFreeAsync(trace, st));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(st));
  static const char* names[] = {"",           "ticket", "stage+tbl", "bookkeep",
                                "stage wait", "S_loc",  "early CB",  "pred wait",
                                "handover",   "Y_off",  "Y_diag",    "epilogue"};
  for (int q = 0; q < 2; ++q) {
    double sum[12] = {}, total = 0, n = 0, tokens = 0, chunks = 0;
    long long g0 = LLONG_MAX, g1 = 0;
    double busy_ns = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const long long* t = h.data() + (b * 2 + q) * kStamps;
      if (t[13] == 0 || t[11] == 0) continue;
      for (int i = 1; i < 12; ++i)
        sum[i] += static_cast<double>(t[i] - t[i - 1]);
      total += static_cast<double>(t[11] - t[0]);
      g0 = std::min(g0, t[12]);
      g1 = std::max(g1, t[13]);
      busy_ns += static_cast<double>(t[13] - t[12]);
      n += 1;
      tokens += static_cast<double>(t[14]) / static_cast<double>(heads);
      chunks = std::max(chunks, static_cast<double>(t[15] + 1));
    }
    if (n == 0) continue;
    std::fprintf(stderr,
                 "ssd_wg trace wg%d tokens %.0f chunks %.0f blocks %.0f cycles/block %.0f:", q,
                 tokens, chunks, n, total / n);
    for (int i = 1; i < 12; ++i)
      std::fprintf(stderr, " %s %.0f", names[i], sum[i] / n);
    std::fprintf(stderr, " | span %.1f us, mean block %.2f us, in flight %.1f\n",
                 static_cast<double>(g1 - g0) / 1000.0, busy_ns / n / 1000.0,
                 busy_ns / static_cast<double>(g1 - g0));
  }
}

template <int NT>
void launch_wg(const SsmLaunch& p, int* index_errors, cudaStream_t st) {
  constexpr int P = 8 * NT;
  static std::atomic<uint64_t> attr{0};
  scan::allow_smem(wg_scan_kernel<NT>, wg_smem(P), attr);
  const FusedScratch fs = fused_scratch_of(p);
  if (!start_wg_scan(p, fs, index_errors, st)) return;
  const int64_t blocks = fs.ch.max_chunks * p.heads;
  long long* trace = trace_buffer(blocks * 2 * kStamps, st);
  const CUtensorMap tm_c = tma_map_bf16_sw128(p.C, kQ), tm_b = tma_map_bf16_sw128(p.B, kQ);
  launch_pdl(wg_scan_kernel<NT>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), wg_smem(P),
             st, p, fs, index_errors, trace, tm_c, tm_b);
  mark_scan_stage("wgmma (chain)");
  if (trace != nullptr) report_trace(trace, blocks, p.heads, st);
}

}  // namespace

bool ssm_scan_wg_device() {
  static std::atomic<int> cached[64];  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  int v = cached[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0, minor = 0;
    const bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
        major == 9 && minor == 0;
    v = ok ? 1 : 2;
    cached[dev].store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void launch_ssm_scan_wg(const SsmLaunch& p, int* index_errors, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (wg_scan_nt(p, "ssm_scan_wg") == 8)
    launch_wg<8>(p, index_errors, st);
  else
    launch_wg<10>(p, index_errors, st);
}

}  // namespace strata::cuda
