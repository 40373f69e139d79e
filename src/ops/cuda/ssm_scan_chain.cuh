// Pieces of the one-pass tensor-core scans (ssm_scan_fused.cu: mma.sync, a block per (chunk,
// head); ssm_scan_wg.cu: wgmma): the scratch they share, the flag protocol of the state hand-over
// between a sequence's chunk blocks, the decay-weighted B fragment, the slots of sequences with
// no tokens, and the chunk's dt / cumsum prologue.
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/ssm.h"
#include "ops/cuda/ssm_scan_common.cuh"

namespace strata::cuda::scan {

namespace {

// The f32 states a block hands on are stored in its fragment order: float4 number
// (tile * NT + j) * 32 + lane holds that lane's four accumulator values of (state tile, j).
struct FusedScratch {
  scan::Chunks ch;             // table and seq_chunks (dt and the cumsum stay in the kernel)
  float* carried = nullptr;    // [nc, Hm, P * N]: the state leaving each chunk (inclusive)
  float* aggregate = nullptr;  // [nc, Hm, P * N]: look-back only: each chunk's own S_loc
  float* decays = nullptr;     // [nc, Hm]: look-back only: exp(cum_last) of each chunk
  int* flags = nullptr;        // [nc, Hm]: 1 = aggregate and decay published, 2 = carried
  int* ticket = nullptr;       // [1]: blocks started so far
};

FusedScratch fused_scratch_of(const SsmLaunch& p) {
  FusedScratch s;
  const int64_t nc = ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size);
  s.ch.max_chunks = nc;
  s.ch.table = p.scratch_i32;
  s.ch.seq_chunks = s.ch.table + nc * 3;
  s.flags = p.scratch_i32 + scan::chunks_i32(p);
  s.ticket = s.flags + nc * p.heads;
  s.carried = p.scratch_f32;
  s.aggregate = s.carried + nc * p.heads * p.head_dim * p.state_size;
  s.decays = s.aggregate + nc * p.heads * p.head_dim * p.state_size;
  return s;
}

__device__ __forceinline__ int load_acquire(const int* at) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(at) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* at, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(at), "r"(v) : "memory");
}
// Drops a 128-byte line from L2 without writing it back (its contents become undefined): for
// a handed-over state that its one reader has consumed, so it never costs a write to memory.
__device__ __forceinline__ void discard_l2_line(const void* line) {
  asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(line) : "memory");
}

// One A register (two bf16 at positions s, s + 1) scaled by w_s, w_{s+1} and rounded to bf16:
// the same products ssm_scan_mma.cu's scale_rows forms in shared memory.
__device__ __forceinline__ uint32_t scale_pair(uint32_t r, float w0, float w1) {
  const __nv_bfloat162 e = *reinterpret_cast<const __nv_bfloat162*>(&r);
  return mma::pack_bf16(w0 * __bfloat162float(e.x), w1 * __bfloat162float(e.y));
}

// What the one-pass kernels launch before their chunk blocks: the chunk table and the cleared
// hand-over flags (and ticket) unless the caller's next kernel clears them. Returns false when the
// step has no tokens: the empty sequences' slots are then finished here and there are no chunk
// blocks to launch.
inline bool start_one_pass(const SsmLaunch& p, const FusedScratch& fs, int* index_errors,
                           cudaStream_t st, bool clear_flags = true) {
  const int64_t nc = fs.ch.max_chunks;
  scan::launch_chunk_table(p, fs.ch, index_errors, st);
  if (nc == 0) {
    scan::launch_state_pass<float>(p, fs.ch, nullptr, static_cast<float*>(nullptr), index_errors,
                                   st);
    return false;
  }
  if (!clear_flags) return true;
  STRATA_CUDA_CHECK(
      cudaMemsetAsync(fs.flags, 0, static_cast<size_t>(nc * p.heads + 1) * sizeof(int), st));
  mark_scan_stage("flags_reset");
  return true;
}

// A sequence of no tokens (or with offsets the chunk table refused) has no chunk blocks; the
// blocks of chunk 0 do what the state passing does for it: head h of its slot is cleared unless
// it continues (has_initial), and a slot out of range is counted. One thread per sequence: such
// sequences are rare, and the usual case costs one look at each sequence's chunk count.
template <int P>
__device__ void clear_empty_sequences(const SsmLaunch& p, const scan::Chunks& ch, int64_t h,
                                      int* errors) {
  const int64_t nseq = p.slots.n, PN = static_cast<int64_t>(P) * p.state_size;
  for (int64_t b = threadIdx.x; b < nseq; b += blockDim.x) {
    if (ch.seq_chunks[2 * b + 1] != 0) continue;
    const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
    if (slot < 0 || slot >= p.num_slots) {
      if (h == 0) atomicAdd(errors, 1);
      continue;
    }
    if (static_cast<const int32_t*>(p.has_initial.p)[b] != 0) continue;
    float* st = p.states + (static_cast<int64_t>(slot) * p.heads + h) * PN;
    for (int64_t e = 0; e < PN; ++e)
      st[e] = 0.f;
  }
}

// The chunk's dt (softplus of dt_raw + dt_bias, zero past its len tokens) and the inclusive
// cumsum of dt A over its Q positions by Hillis-Steele (the order of
// scan::chunk_cumsum_kernel, so the same f32 values), then ws[l] = exp(cum[len-1] - cum[l]) *
// dt[l], the decay weight of position l into the chunk's end state; returns cum[len - 1]. Threads
// 0 .. Q - 1 of the block own one position each; every thread of the block must call it (it
// synchronizes).
__device__ __forceinline__ float chunk_dt_cumsum(const SsmLaunch& p, int64_t t0, int len, int64_t h,
                                                 int Q, float* dts, float* cum, float* ws) {
  const int l = static_cast<int>(threadIdx.x);
  if (l < Q) {
    float dt = 0.f;
    if (l < len)
      dt = softplusf_(to_f32(static_cast<const bf16*>(p.dt_raw.p)[(t0 + l) * p.dt_raw.ld + h]) +
                      load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h));
    dts[l] = dt;
    cum[l] = dt * p.A[h];
  }
  __syncthreads();
  for (int off = 1; off < Q; off <<= 1) {
    const float add = l < Q && l >= off ? cum[l - off] : 0.f;
    __syncthreads();
    if (l < Q) cum[l] += add;
    __syncthreads();
  }
  const float last = cum[len - 1];
  if (l < Q) ws[l] = expf(last - cum[l]) * dts[l];
  return last;
}

}  // namespace
}  // namespace strata::cuda::scan
