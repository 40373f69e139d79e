// Pieces both chunked-scan paths share (ssm_scan.cu: f32 math on CUDA cores, any act dtype;
// ssm_scan_mma.cu: bf16 on tensor cores): the chunk table, dt and the in-chunk cumsum of
// dt * A, and the state passing between a sequence's chunks. Kernels live in an anonymous
// namespace: each .cu that includes this header gets its own copies.
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/ssm.h"

namespace strata::cuda::scan {

// The chunk bookkeeping both paths keep in their scratch.
struct Chunks {
  int64_t max_chunks = 0;
  float* dt = nullptr;            // [nc, Hm, Q]: dt_l, 0 past the chunk's length
  float* cum = nullptr;           // [nc, Hm, Q]: inclusive cumsum of dt_l * A within the chunk
  int32_t* table = nullptr;       // [nc, 3]: sequence, first token, length (0 = unused)
  int32_t* seq_chunks = nullptr;  // [B, 2]: first chunk, chunk count
};

// f32 elements of dt and cum, and i32 elements of the tables.
inline int64_t chunks_f32(const SsmLaunch& p) {
  return ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size) * p.heads * p.chunk_size * 2;
}
inline int64_t chunks_i32(const SsmLaunch& p) {
  return ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size) * 3 + p.slots.n * 2;
}
// Carves the bookkeeping from the front of the caller's scratch.
inline Chunks chunks_of(const SsmLaunch& p) {
  Chunks s;
  const int64_t nc = ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size);
  s.max_chunks = nc;
  s.dt = p.scratch_f32;
  s.cum = s.dt + nc * p.heads * p.chunk_size;
  s.table = p.scratch_i32;
  s.seq_chunks = s.table + nc * 3;
  return s;
}

namespace {

// A sequence's chunk count: 0 for no tokens or for offsets outside the packed tokens (*bad set;
// the caller counts it as an index error and skips the sequence).
__device__ __forceinline__ int32_t seq_chunk_count(int32_t start, int32_t len, int64_t tokens,
                                                   int Q, bool* bad) {
  *bad = start < 0 || len < 0 || start + static_cast<int64_t>(len) > tokens;
  return (len > 0 && !*bad) ? (len + Q - 1) / Q : 0;
}

// A sequence's chunk count `n` capped at the table rows left from its first chunk `first`
// (<= max_chunks). Why: refused offsets let valid neighbours overlap (cu_seqlens [0, 448, 64,
// 512] over 512 tokens: [0, 448) and [64, 512)), and ssm_scan_max_chunks counts disjoint
// sequences, so their chunks may outnumber the table's rows; every consumer of seq_chunks reads
// table[first .. first + count) and per-chunk scratch. A cut sequence is scanned over the chunks
// that fit (its slot gets the state after them) and *cut asks the caller to count one more index
// error for it.
__device__ __forceinline__ int32_t fit_chunks(int32_t n, int64_t first, int64_t max_chunks,
                                              bool* cut) {
  const int64_t room = max_chunks - first;
  *cut = n > room;
  return *cut ? static_cast<int32_t>(room) : n;
}

__global__ void chunk_table_kernel(const int32_t* cu, int nseq, int64_t tokens, int Q,
                                   int64_t max_chunks, int32_t* table, int32_t* seq_chunks,
                                   int* errors) {
  if (threadIdx.x != 0) return;
  int64_t c = 0;
  for (int b = 0; b < nseq; ++b) {
    const int32_t start = cu[b], len = cu[b + 1] - cu[b];
    bool bad = false, cut = false;
    const int32_t n = fit_chunks(seq_chunk_count(start, len, tokens, Q, &bad), c, max_chunks, &cut);
    if (bad) atomicAdd(errors, 1);  // offsets outside the packed tokens: skip the sequence
    if (cut) atomicAdd(errors, 1);  // more chunks than rows left (overlapping sequences)
    seq_chunks[2 * b] = static_cast<int32_t>(c);
    seq_chunks[2 * b + 1] = n;
    for (int32_t i = 0; i < n; ++i, ++c) {
      table[3 * c] = b;
      table[3 * c + 1] = start + i * Q;
      table[3 * c + 2] = min(Q, len - i * Q);
    }
  }
  for (; c < max_chunks; ++c)
    table[3 * c + 2] = 0;
}

// grid (nc, Hm), block Q threads: dt and the inclusive cumsum of dt * A within the chunk.
template <class T>
__global__ void chunk_cumsum_kernel(SsmLaunch p, Chunks s) {
  extern __shared__ float sh[];  // [Q]
  const int64_t c = blockIdx.x, h = blockIdx.y, Q = p.chunk_size, Hm = p.heads;
  const int l = threadIdx.x;
  const int32_t len = s.table[3 * c + 2];
  if (len == 0) return;
  const int64_t t = s.table[3 * c + 1] + l;
  float dt = 0.f;
  if (l < len)
    dt = softplusf_(to_f32(static_cast<const T*>(p.dt_raw.p)[t * p.dt_raw.ld + h]) +
                    load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h));
  sh[l] = dt * p.A[h];
  __syncthreads();
  for (int off = 1; off < Q; off <<= 1) {  // Hillis-Steele inclusive scan
    const float add = l >= off ? sh[l - off] : 0.f;
    __syncthreads();
    sh[l] += add;
    __syncthreads();
  }
  s.dt[(c * Hm + h) * Q + l] = dt;
  s.cum[(c * Hm + h) * Q + l] = sh[l];
}

constexpr int kStatePassBatch = 8;

// grid (B, Hm, ceil(P*N / 256)): walks a sequence's chunks in order. `loc` [nc, Hm, P, N] holds
// each chunk's own contribution; `sin` [nc, Hm, P, N] receives the state entering each chunk
// (stored as OutT; may be `loc` itself when OutT is float: each element is read before it is
// overwritten by the same thread). Writes the final state (f32) to the sequence's slot.
template <class OutT>
__global__ void state_pass_kernel(SsmLaunch p, Chunks s, const float* loc, OutT* sin, int* errors) {
  const int64_t b = blockIdx.x, h = blockIdx.y, Q = p.chunk_size, Hm = p.heads;
  const int64_t PN = p.head_dim * p.state_size;
  const int64_t e = static_cast<int64_t>(blockIdx.z) * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const int32_t slot = static_cast<const int32_t*>(p.slots.p)[b];
  if (slot < 0 || slot >= p.num_slots) {
    if (e == 0 && h == 0) atomicAdd(errors, 1);
    return;
  }
  float* final_state = p.states + (static_cast<int64_t>(slot) * Hm + h) * PN + e;
  float run = static_cast<const int32_t*>(p.has_initial.p)[b] ? *final_state : 0.f;
  const int32_t first = s.seq_chunks[2 * b], count = s.seq_chunks[2 * b + 1];
  // The loads of a batch of chunks (independent of the running state) are issued before its
  // serial updates: one memory latency per kStatePassBatch chunks instead of one per chunk.
  // Every element is still read before the same thread overwrites it (sin may be loc).
  for (int32_t c0 = first; c0 < first + count; c0 += kStatePassBatch) {
    float own[kStatePassBatch], decay[kStatePassBatch];
#pragma unroll
    for (int i = 0; i < kStatePassBatch; ++i) {
      const int32_t c = c0 + i;
      own[i] = decay[i] = 0.f;
      if (c < first + count) {
        own[i] = loc[(static_cast<int64_t>(c) * Hm + h) * PN + e];
        const int32_t len = s.table[3 * c + 2];
        decay[i] = s.cum[(static_cast<int64_t>(c) * Hm + h) * Q + len - 1];
      }
    }
#pragma unroll
    for (int i = 0; i < kStatePassBatch; ++i) {
      const int32_t c = c0 + i;
      if (c >= first + count) break;
      sin[(static_cast<int64_t>(c) * Hm + h) * PN + e] = from_f32<OutT>(run);
      run = expf(decay[i]) * run + own[i];
    }
  }
  *final_state = run;
}

// Launches the chunk table kernel (the first of every path).
inline void launch_chunk_table(const SsmLaunch& p, const Chunks& ch, int* index_errors,
                               cudaStream_t st) {
  chunk_table_kernel<<<1, 32, 0, st>>>(
      static_cast<const int32_t*>(p.cu_seqlens.p), static_cast<int>(p.slots.n), p.x.rows,
      static_cast<int>(p.chunk_size), ch.max_chunks, ch.table, ch.seq_chunks, index_errors);
  STRATA_CUDA_LAUNCH_CHECK();
  mark_scan_stage("chunk_table");
}

// Launches the chunk table and the dt/cumsum kernels (the first two of both paths).
template <class T>
void launch_chunk_prologue(const SsmLaunch& p, const Chunks& ch, int* index_errors,
                           cudaStream_t st) {
  const int64_t Q = p.chunk_size;
  launch_chunk_table(p, ch, index_errors, st);
  if (ch.max_chunks == 0) return;
  chunk_cumsum_kernel<T>
      <<<dim3(static_cast<unsigned>(ch.max_chunks), static_cast<unsigned>(p.heads)),
         static_cast<unsigned>(Q), Q * sizeof(float), st>>>(p, ch);
  STRATA_CUDA_LAUNCH_CHECK();
  mark_scan_stage("chunk_cumsum");
}

// Launches the state passing: `sin` gets the state entering each chunk as OutT.
template <class OutT>
void launch_state_pass(const SsmLaunch& p, const Chunks& ch, const float* loc, OutT* sin,
                       int* index_errors, cudaStream_t st) {
  const int64_t PN = p.head_dim * p.state_size;
  state_pass_kernel<OutT><<<dim3(static_cast<unsigned>(p.slots.n), static_cast<unsigned>(p.heads),
                                 static_cast<unsigned>((PN + 255) / 256)),
                            256, 0, st>>>(p, ch, loc, sin, index_errors);
  STRATA_CUDA_LAUNCH_CHECK();
  mark_scan_stage("state_pass");
}

}  // namespace
}  // namespace strata::cuda::scan
