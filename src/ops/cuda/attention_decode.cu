// bf16 decode attention (one query per sequence) for the real models' shapes: head_dim 64/128,
// GQA groups of up to 16 query heads. Flash-decoding over the paged cache:
// - grid (splits, kv heads, sequences); a block streams its split of the context through a
//   3-stage cp.async pipeline of 128-key tiles (16-byte copies, every copy of a tile in flight at
//   once, no registers held by loads), then merges its 8 warps' partial softmax states;
// - a warp scores its 16 keys of a tile for all query heads of the group at once with bf16
//   tensor cores (mma m16n8k16: the group's heads are the 16 rows, keys the columns, f32
//   accumulation; products of bf16 values are exact in f32), so each K/V byte loaded is used by
//   every head; P.V runs on the tensor cores too, with P split into bf16 hi + lo parts (two
//   mmas) so the probabilities keep ~16 bits instead of bf16's 8;
// - every split writes its partial (max, sum, output rows); the last block of a (sequence, kv
//   head) to finish (atomic ticket after __threadfence) merges them, writes the output and
//   resets the ticket for the next launch (or CUDA graph replay). Splits past a sequence's
//   context exit at once and are not waited for: the ticket target is the number of splits the
//   context covers, which every block computes from the context length it reads.
// Register fragments follow the PTX ISA's m16n8k16 layouts (groupID g = lane / 4, t = lane % 4).
// The k index of the score mma is mapped to head dims so that one 16-byte K chunk (8 dims) gives
// a thread its B fragments of two k-steps; the n index of the P.V mma is mapped to dims so that
// a thread's V values of every n-tile are one contiguous run of its rows.
#include <algorithm>
#include <cfloat>
#include <mutex>

#include "ops/cuda/attention.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpKeys = 16;                  // keys a warp scores per tile (two n8 tiles)
constexpr int kTileKeys = kWarps * kWarpKeys;  // keys per pipeline stage
constexpr int kStages = 3;
constexpr int kRows = 16;        // mma rows: query heads of the group (zero-padded)
constexpr int kMaxSplits = 64;   // merge weights staged in shared memory per row
constexpr int64_t kMergeBytes = 160 * 1024;  // partials one merging block reads, at most

template <int HD>
struct Geo {
  static constexpr int kRowBytes = HD * 2;        // one bf16 K or V row
  static constexpr int kChunks = HD / 8;          // 16-byte chunks of a row
  static constexpr int kQChunks = HD / 32;        // chunks of a q/K row one thread holds
  static constexpr int kKSteps = HD / 16;         // k-steps of a score
  static constexpr int kNTiles = HD / 8;          // n8 tiles of the P.V output
  static constexpr int kVDims = HD / 8;           // V dims per thread: g * kVDims + j
  static constexpr int kVChunks = kVDims / 8;     // 16-byte chunks of those, per key
  static constexpr int kStageBytes = 2 * kTileKeys * kRowBytes;  // K tile, then V tile
  static constexpr int kCopies = kTileKeys * kChunks / kThreads;  // 16-byte copies per thread
  static_assert(kTileKeys * kChunks % kThreads == 0, "whole copies per thread");
  static_assert(kVChunks >= 1, "head_dim 64 or 128");
};

// Shared-memory layout past the stages.
template <int HD>
struct Smem {
  static constexpr size_t kPages = size_t{kStages} * Geo<HD>::kStageBytes;
  static constexpr size_t kWarpMax = kPages + kDecodeMaxPagesPerSplit * sizeof(int);
  static constexpr size_t kWarpSum = kWarpMax + kWarps * kRows * sizeof(float);
  static constexpr size_t kWeights = kWarpSum + kWarps * kRows * sizeof(float);
  static constexpr size_t kRowSum = kWeights + kRows * kMaxSplits * sizeof(float);
  static constexpr size_t kFlag = kRowSum + kRows * sizeof(float);
  static constexpr size_t kBytes = kFlag + 16;
  // The warps' outputs in fragment order, [kWarps][32][4 * HD / 8 + 4] f32, reuse the stage
  // area once it is drained.
  static_assert(size_t{kWarps} * 32 * (4 * (HD / 8) + 4) * sizeof(float) <= kPages,
                "merge buffer fits");
};

// 16-byte chunk swizzles (chunk index XOR a function of the row within the tile) that make the
// fragment reads below free of shared-memory bank conflicts (each quarter-warp of a 16-byte
// load touches 8 distinct 16-byte bank groups).
// K: thread (g, t) reads row 8j + g, chunk 4c + t: rows g and g + 1 of a quarter-warp differ in
// bit 0 of the row, which flips bit 2 of the chunk.
__device__ __forceinline__ int k_swizzle(int row) {
  return (row & 1) << 2;
}
// V: thread (g, t) reads rows 2t, 2t+1, 2t+8, 2t+9 (of its warp's 16), chunks g * kVChunks + i:
// the four t of a quarter-warp must land on four distinct values of the chunk bits g does not
// set (bits 0 and 2 when g moves bit 1 (HD 128), bits 1 and 2 when g moves bit 0 (HD 64)).
template <int HD>
__device__ __forceinline__ int v_swizzle(int row) {
  const int a = (row >> 1) & 1, b = (row >> 2) & 1;
  return HD == 128 ? (a | (b << 2)) : ((a << 1) | (b << 2));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: zero-fill (masked keys must not carry stale values)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint4 lds128(const char* p) {
  return *reinterpret_cast<const uint4*>(p);
}

// d += a . b (m16n8k16, bf16 in, f32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// (lo, hi) -> bf16 pair of the remainders after rounding: x - f32(bf16(x)).
__device__ __forceinline__ uint32_t pack_bf16_rest(float lo, float hi) {
  const float rl = lo - __bfloat162float(__float2bfloat16_rn(lo));
  const float rh = hi - __bfloat162float(__float2bfloat16_rn(hi));
  return pack_bf16(rl, rh);
}

struct DecodeArgs {
  AttentionLaunch p;
  int64_t splits, split_len;
  int* counters;  // [B * n_kv], zero between launches
  int* errors;
};

template <int HD>
__global__ void __launch_bounds__(kThreads, 1) attention_decode_kernel(DecodeArgs a) {
  pdl_enter();
  using G = Geo<HD>;
  using L = Smem<HD>;
  extern __shared__ __align__(16) char sm[];
  int* pages = reinterpret_cast<int*>(sm + L::kPages);
  float* wmax_sh = reinterpret_cast<float*>(sm + L::kWarpMax);  // [kWarps][kRows]
  float* wsum_sh = reinterpret_cast<float*>(sm + L::kWarpSum);  // [kWarps][kRows]
  float* weights = reinterpret_cast<float*>(sm + L::kWeights);   // [kRows][kMaxSplits]
  float* row_sum = reinterpret_cast<float*>(sm + L::kRowSum);    // [kRows]
  int* flag = reinterpret_cast<int*>(sm + L::kFlag);

  const AttentionLaunch& p = a.p;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int group = static_cast<int>(p.n_heads / p.n_kv_heads);
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int q_start = cu[b], q_len = cu[b + 1] - cu[b];
  int ctx = static_cast<const int32_t*>(p.context_lens.p)[b];
  const int max_ctx = static_cast<int>(p.block_tables.cols * p.block_size);
  if (tid == 0 && split == 0 && kvh == 0 && (q_len > 1 || q_len < 0 || ctx < q_len || ctx > max_ctx))
    atomicAdd(a.errors, 1);  // inconsistent lengths: clamp; a sequence without keys gives zeros
  if (q_len != 1) return;    // every block of the sequence leaves alike: no ticket taken
  ctx = max(0, min(ctx, max_ctx));
  const int split_len = static_cast<int>(a.split_len);
  const int active = ctx > 0 ? (ctx + split_len - 1) / split_len : 1;  // splits with keys
  if (split >= active) return;
  const int k_begin = split * split_len, k_end = min(k_begin + split_len, ctx);

  // Q fragments (A operand, rows = heads of the group): chunk c of row h holds dims
  // 32c + 8t .. + 7, i.e. k-steps 2c (dims +0..3) and 2c + 1 (dims +4..7).
  uint32_t qa[G::kKSteps][4];
  {
    const bf16* q = static_cast<const bf16*>(p.q.p) + static_cast<int64_t>(q_start) * p.q.ld +
                    static_cast<int64_t>(kvh) * group * HD;
#pragma unroll
    for (int c = 0; c < G::kQChunks; ++c) {
      const uint4 zero = make_uint4(0, 0, 0, 0);
      const uint4 lo = g < group ? *reinterpret_cast<const uint4*>(q + g * HD + c * 32 + t * 8)
                                 : zero;
      const uint4 hi = g + 8 < group
                           ? *reinterpret_cast<const uint4*>(q + (g + 8) * HD + c * 32 + t * 8)
                           : zero;
      qa[2 * c][0] = lo.x;
      qa[2 * c][1] = hi.x;
      qa[2 * c][2] = lo.y;
      qa[2 * c][3] = hi.y;
      qa[2 * c + 1][0] = lo.z;
      qa[2 * c + 1][1] = hi.z;
      qa[2 * c + 1][2] = lo.w;
      qa[2 * c + 1][3] = hi.w;
    }
  }

  // This split's page-table entries, checked once.
  const int bs = static_cast<int>(p.block_size);
  const int first_page = k_begin / bs;
  const int n_pages = k_end > k_begin ? (k_end - 1) / bs - first_page + 1 : 0;
  const int32_t* table = static_cast<const int32_t*>(p.block_tables.p) + b * p.block_tables.ld;
  for (int i = tid; i < n_pages; i += kThreads) {
    int32_t pg = table[first_page + i];
    if (pg < 0 || pg >= p.num_blocks) {
      atomicAdd(a.errors, 1);
      pg = -1;  // its keys read as zeros
    }
    pages[i] = pg;
  }
  __syncthreads();

  const bf16* kc = static_cast<const bf16*>(p.k_cache);
  const bf16* vc = static_cast<const bf16*>(p.v_cache);
  const int64_t kv_stride = p.n_kv_heads * HD;  // elements between consecutive cache rows
  const int n_tiles = (k_end - k_begin + kTileKeys - 1) / kTileKeys;

  // Copies: a thread always moves chunk column cc of tile rows rr, rr + kRowsPerPass, ...
  // (kRowsPerPass is a multiple of 8, so the rows' swizzles are rr's); its page and row within
  // the page advance incrementally (one division per tile, not per copy).
  constexpr int kRowsPerPass = kThreads / G::kChunks;
  static_assert(kRowsPerPass % 8 == 0, "swizzles depend on the row's low 3 bits only");
  const int cc = tid % G::kChunks, rr = tid / G::kChunks;
  const int k_dst = rr * G::kRowBytes + ((cc ^ k_swizzle(rr)) << 4);
  const int v_dst = rr * G::kRowBytes + ((cc ^ v_swizzle<HD>(rr)) << 4);
  const int64_t head_off = static_cast<int64_t>(kvh) * HD + cc * 8;
  auto issue = [&](int tile) {
    char* sk = sm + (tile % kStages) * G::kStageBytes;
    char* sv = sk + kTileKeys * G::kRowBytes;
    int pos = k_begin + tile * kTileKeys + rr;
    int pi = pos / bs - first_page, row = pos % bs;  // page index in `pages`, row in the page
#pragma unroll
    for (int it = 0; it < G::kCopies; ++it) {
      const bf16* ks = kc;
      const bf16* vs = vc;
      bool ok = false;
      if (pos < k_end) {
        const int pg = pages[pi];
        if (pg >= 0) {
          const int64_t off = (static_cast<int64_t>(pg) * bs + row) * kv_stride + head_off;
          ks = kc + off;
          vs = vc + off;
          ok = true;
        }
      }
      cp_async16(sk + k_dst + it * kRowsPerPass * G::kRowBytes, ks, ok);
      cp_async16(sv + v_dst + it * kRowsPerPass * G::kRowBytes, vs, ok);
      pos += kRowsPerPass;
      row += kRowsPerPass;
      while (row >= bs) {  // once for block sizes >= kRowsPerPass
        row -= bs;
        ++pi;
      }
    }
  };

  // Per warp: running max m and (thread-partial) sum l of rows g and g + 8, output o[j] of
  // n-tile j: o[j][0..1] row g, dims (2t, 2t+1) * kVDims + j; o[j][2..3] row g + 8.
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  float o[G::kNTiles][4];
#pragma unroll
  for (int j = 0; j < G::kNTiles; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

  auto compute = [&](int tile) {
    const int key0 = k_begin + tile * kTileKeys + warp * kWarpKeys;  // the warp's first key
    if (key0 >= k_end) return;
    const char* sk = sm + (tile % kStages) * G::kStageBytes;
    const char* sv = sk + kTileKeys * G::kRowBytes;
    const int r0 = warp * kWarpKeys;
    // Scores: sc[j] = S[rows g, g+8][keys 8j + 2t, 8j + 2t + 1].
    float sc[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
      const int row = r0 + 8 * j + g;
      const char* kr = sk + row * G::kRowBytes;
#pragma unroll
      for (int c = 0; c < G::kQChunks; ++c) {
        const uint4 u = lds128(kr + (((4 * c + t) ^ k_swizzle(row)) << 4));
        mma_bf16(sc[j], qa[2 * c], u.x, u.y);
        mma_bf16(sc[j], qa[2 * c + 1], u.z, u.w);
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = key0 + 8 * j + 2 * t + e < k_end;
        sc[j][e] = valid ? sc[j][e] * p.scale : -INFINITY;
        sc[j][2 + e] = valid ? sc[j][2 + e] * p.scale : -INFINITY;
        mx0 = fmaxf(mx0, sc[j][e]);
        mx1 = fmaxf(mx1, sc[j][2 + e]);
      }
    // Row max over the 4 threads of the group (lanes 4g .. 4g + 3).
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // key0 < k_end: every row sees a key, the new maxima are finite.
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    const float c0 = expf(m0 - n0), c1 = expf(m1 - n1);  // 0 on the first visit (m = -inf)
    const bool moved = __any_sync(0xffffffffu, n0 != m0 || n1 != m1);  // else c0 = c1 = 1
    m0 = n0;
    m1 = n1;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[j][e] = expf(sc[j][e] - n0);  // masked: exp(-inf) = 0
        sc[j][2 + e] = expf(sc[j][2 + e] - n1);
      }
    l0 = l0 * c0 + (sc[0][0] + sc[0][1] + sc[1][0] + sc[1][1]);
    l1 = l1 * c1 + (sc[0][2] + sc[0][3] + sc[1][2] + sc[1][3]);
    if (moved) {
#pragma unroll
      for (int j = 0; j < G::kNTiles; ++j) {
        o[j][0] *= c0;
        o[j][1] *= c0;
        o[j][2] *= c1;
        o[j][3] *= c1;
      }
    }
    // P as the A operand (rows g, g+8; k = key within the warp's 16): the score accumulators
    // already sit in that layout. hi + lo bf16 parts keep the probabilities' precision.
    const uint32_t ph[4] = {pack_bf16(sc[0][0], sc[0][1]), pack_bf16(sc[0][2], sc[0][3]),
                            pack_bf16(sc[1][0], sc[1][1]), pack_bf16(sc[1][2], sc[1][3])};
    const uint32_t pl[4] = {pack_bf16_rest(sc[0][0], sc[0][1]), pack_bf16_rest(sc[0][2], sc[0][3]),
                            pack_bf16_rest(sc[1][0], sc[1][1]), pack_bf16_rest(sc[1][2], sc[1][3])};
    // V rows 2t, 2t+1, 2t+8, 2t+9 of the warp, dims g * kVDims .. + kVDims - 1.
    uint32_t vw[4][G::kVDims / 2];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = r0 + 2 * t + (q & 1) + 8 * (q >> 1);
      const char* vr = sv + row * G::kRowBytes;
#pragma unroll
      for (int i = 0; i < G::kVChunks; ++i) {
        const uint4 u = lds128(vr + (((g * G::kVChunks + i) ^ v_swizzle<HD>(row)) << 4));
        vw[q][4 * i] = u.x;
        vw[q][4 * i + 1] = u.y;
        vw[q][4 * i + 2] = u.z;
        vw[q][4 * i + 3] = u.w;
      }
    }
#pragma unroll
    for (int j = 0; j < G::kNTiles; ++j) {
      const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;  // high or low bf16 of each word
      const uint32_t b0 = __byte_perm(vw[0][j / 2], vw[1][j / 2], sel);
      const uint32_t b1 = __byte_perm(vw[2][j / 2], vw[3][j / 2], sel);
      mma_bf16(o[j], ph, b0, b1);
      mma_bf16(o[j], pl, b0, b1);
    }
  };

  // The pipeline: tiles t+1 and t+2 in flight while tile t is computed.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < n_tiles) issue(i);
    cp_async_commit();
  }
  for (int tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<kStages - 2>();  // this thread's copies of `tile` landed
    __syncthreads();               // everyone's landed, and tile - 1's stage is free
    if (tile + kStages - 1 < n_tiles) issue(tile + kStages - 1);
    cp_async_commit();
    compute(tile);
  }
  cp_async_wait<0>();

  // Merge the warps: row sums over the 4 threads of a group, then each warp's output rows
  // rescaled to the block maximum, summed through shared memory.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  __syncthreads();  // the stage area is drained: reuse it for the warps' output rows
  if (t == 0) {
    wmax_sh[warp * kRows + g] = m0;
    wmax_sh[warp * kRows + g + 8] = m1;
    wsum_sh[warp * kRows + g] = l0;
    wsum_sh[warp * kRows + g + 8] = l1;
  }
  __syncthreads();
  // The warps' outputs in fragment order, [kWarps][32 lanes][kLaneFloats] (a lane's 4 x kNTiles
  // values plus 4 floats of padding, so the 8 lanes of a quarter-warp hit distinct banks), each
  // rescaled to the block's row maxima.
  constexpr int kLaneFloats = 4 * G::kNTiles + 4;
  float* obuf = reinterpret_cast<float*>(sm);
  float bm0 = -INFINITY, bm1 = -INFINITY, bs0 = 0.f, bs1 = 0.f;  // block max and sum, rows g, g+8
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    bm0 = fmaxf(bm0, wmax_sh[w * kRows + g]);
    bm1 = fmaxf(bm1, wmax_sh[w * kRows + g + 8]);
  }
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float w0 = wmax_sh[w * kRows + g], w1 = wmax_sh[w * kRows + g + 8];
    if (w0 != -INFINITY) bs0 += wsum_sh[w * kRows + g] * expf(w0 - bm0);  // -inf: no key seen
    if (w1 != -INFINITY) bs1 += wsum_sh[w * kRows + g + 8] * expf(w1 - bm1);
  }
  {
    const float s0 = m0 == -INFINITY ? 0.f : expf(m0 - bm0);
    const float s1 = m1 == -INFINITY ? 0.f : expf(m1 - bm1);
    float4* dst = reinterpret_cast<float4*>(obuf + (warp * 32 + lane) * kLaneFloats);
#pragma unroll
    for (int j = 0; j < G::kNTiles; ++j)
      dst[j] = make_float4(o[j][0] * s0, o[j][1] * s0, o[j][2] * s1, o[j][3] * s1);
  }
  __syncthreads();
  // Summed over the warps: thread (warp w', lane) takes n-tiles kJ * w' .. + kJ - 1 of that lane
  // (the same (g, t) as the lane, so its rows are g and g + 8).
  constexpr int kJ = G::kNTiles / kWarps;
  float sum[kJ][4];
#pragma unroll
  for (int jj = 0; jj < kJ; ++jj) {
    sum[jj][0] = sum[jj][1] = sum[jj][2] = sum[jj][3] = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 v =
          reinterpret_cast<const float4*>(obuf + (w * 32 + lane) * kLaneFloats)[kJ * warp + jj];
      sum[jj][0] += v.x;
      sum[jj][1] += v.y;
      sum[jj][2] += v.z;
      sum[jj][3] += v.w;
    }
  }
  // Element (jj, q) of this thread: row g (q < 2) or g + 8, dim (2t + (q & 1)) * kVDims + j.
  auto each_value = [&](auto&& f) {
#pragma unroll
    for (int jj = 0; jj < kJ; ++jj)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        f(g + 8 * (q >> 1), (2 * t + (q & 1)) * G::kVDims + kJ * warp + jj, sum[jj][q]);
  };
  const int64_t bk = static_cast<int64_t>(b) * p.n_kv_heads + kvh;
  bf16* out_rows = static_cast<bf16*>(p.out.p) + static_cast<int64_t>(q_start) * p.out.ld +
                   static_cast<int64_t>(kvh) * group * HD;  // [group][HD]
  if (active == 1) {
    const float i0 = bs0 > 0.f ? 1.f / bs0 : 0.f, i1 = bs1 > 0.f ? 1.f / bs1 : 0.f;
    each_value([&](int row, int dim, float v) {
      if (row < group) out_rows[row * HD + dim] = __float2bfloat16_rn(v * (row < 8 ? i0 : i1));
    });
    return;
  }

  // Partials: outputs [B * n_kv][splits][group][HD], then (max, sum) [B * n_kv][splits][group].
  const int64_t S = a.splits;
  float* po = p.partials;
  float* pml = po + (p.cu_seqlens_q.n - 1) * p.n_kv_heads * S * group * HD;
  float* my_rows = po + (bk * S + split) * group * HD;
  each_value([&](int row, int dim, float v) {
    if (row < group) my_rows[row * HD + dim] = v;
  });
  if (warp == 0 && t == 0) {
    if (g < group) {
      pml[2 * ((bk * S + split) * group + g)] = bm0;
      pml[2 * ((bk * S + split) * group + g) + 1] = bs0;
    }
    if (g + 8 < group) {
      pml[2 * ((bk * S + split) * group + g + 8)] = bm1;
      pml[2 * ((bk * S + split) * group + g + 8) + 1] = bs1;
    }
  }
  __threadfence();  // the partials are visible device-wide before the ticket is taken
  __syncthreads();
  if (tid == 0) *flag = atomicAdd(a.counters + bk, 1) == active - 1;
  __syncthreads();
  if (!*flag) return;
  // The last block: every other active split has published its partials.
  if (tid == 0) a.counters[bk] = 0;  // ready for the next launch
  __threadfence();
  // Split weights: warp w merges rows w and w + 8 (lanes over splits).
  for (int r = warp; r < group; r += kWarps) {
    float ms[2], ls[2], mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int s = lane + 32 * k;
      ms[k] = -INFINITY;
      ls[k] = 0.f;
      if (s < active) {
        ms[k] = __ldcg(pml + 2 * ((bk * S + s) * group + r));
        ls[k] = __ldcg(pml + 2 * ((bk * S + s) * group + r) + 1);
      }
      mx = fmaxf(mx, ms[k]);
    }
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int s = lane + 32 * k;
      const float w = ms[k] == -INFINITY ? 0.f : expf(ms[k] - mx);
      if (s < active) weights[r * kMaxSplits + s] = w;
      sum += w * ls[k];
    }
    sum = warp_sum(sum);
    if (lane == 0) row_sum[r] = sum;
  }
  __syncthreads();
  // Thread -> (row, 8 consecutive dims) of the output.
  constexpr int kDimGroups = HD / 8;
  const int row = tid / kDimGroups, d0 = (tid % kDimGroups) * 8;
  if (row >= group) return;
  bf16* out = out_rows + row * HD + d0;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  // Unrolled without a branch, so the loads of several splits are in flight together (a zero
  // weight multiplies a finite partial: every active split wrote its rows).
#pragma unroll 8
  for (int s = 0; s < active; ++s) {
    const float w = weights[row * kMaxSplits + s];
    const float4* src = reinterpret_cast<const float4*>(po + ((bk * S + s) * group + row) * HD + d0);
    const float4 x = __ldcg(src), y = __ldcg(src + 1);
    acc[0] += w * x.x;
    acc[1] += w * x.y;
    acc[2] += w * x.z;
    acc[3] += w * x.w;
    acc[4] += w * y.x;
    acc[5] += w * y.y;
    acc[6] += w * y.z;
    acc[7] += w * y.w;
  }
  const float total = row_sum[row];
  const float inv = total > 0.f ? 1.f / total : 0.f;
#pragma unroll
  for (int d = 0; d < 8; ++d)
    out[d] = __float2bfloat16_rn(acc[d] * inv);
}


}  // namespace

bool attention_decode_shape_supported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kDecodeMaxGroup;
}

DecodeAttentionPlan plan_attention_decode(const AttentionLaunch& p, int sms,
                                          int64_t min_split_keys) {
  DecodeAttentionPlan plan;
  const int64_t B = p.cu_seqlens_q.n - 1, group = p.n_heads / p.n_kv_heads;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t bk = B * p.n_kv_heads;
  const int64_t min_keys = std::max<int64_t>(16, min_split_keys);
  const int64_t forced = attention_splits_override();  // tests and tuning
  int64_t s = std::max<int64_t>(1, sms / std::max<int64_t>(1, bk));  // one wave of blocks
  s = std::min(s, (max_ctx + min_keys - 1) / min_keys);
  if (forced > 0) s = forced;
  const int64_t merge_rows = group * (p.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  s = std::min(s, std::max<int64_t>(1, kMergeBytes / merge_rows));
  s = std::min<int64_t>(s, kMaxSplits);
  if (bk > kDecodeCounters) s = 1;
  // Each split's page entries fit in shared memory.
  const int64_t keys_fit = (kDecodeMaxPagesPerSplit - 2) * p.block_size;
  s = std::max(s, (max_ctx + keys_fit - 1) / keys_fit);
  s = std::max<int64_t>(s, 1);
  int64_t len = (max_ctx + s - 1) / s;
  len = std::max<int64_t>(16, (len + 15) / 16 * 16);
  plan.splits = std::max<int64_t>(1, (max_ctx + len - 1) / len);
  plan.split_len = len;
  if (plan.splits > kMaxSplits || (plan.splits > 1 && bk > kDecodeCounters) ||
      len / p.block_size + 2 > kDecodeMaxPagesPerSplit)
    plan.splits = 0;  // no plan: the caller refuses the shape
  return plan;
}

int64_t attention_decode_partials_floats(const AttentionLaunch& p,
                                         const DecodeAttentionPlan& plan) {
  if (plan.splits <= 1) return 0;
  const int64_t B = p.cu_seqlens_q.n - 1;
  return B * p.n_kv_heads * plan.splits * p.n_heads / p.n_kv_heads * (p.head_dim + 2);
}

int64_t attention_decode_ticket_count() {
  return kDecodeCounters;
}

void launch_attention_decode(const AttentionLaunch& p, const DecodeAttentionPlan& plan,
                             int* tickets, int* index_errors, void* stream) {
  const int64_t B = p.cu_seqlens_q.n - 1;
  if (p.q.rows == 0 || B <= 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  int* counters = plan.splits > 1 ? tickets : nullptr;
  if (plan.splits > 1 && !counters)
    STRATA_CUDA_FAIL("attention decode: split tickets not made (attention_decode_tickets)");
  DecodeArgs a{p, plan.splits, plan.split_len, counters, index_errors};
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(p.n_kv_heads),
                  static_cast<unsigned>(B));
  auto launch = [&](auto kernel, size_t smem) {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
    launch_pdl(kernel, grid, dim3(kThreads), smem, s, a);
    STRATA_CUDA_LAUNCH_CHECK();
  };
  if (p.head_dim == 128)
    launch(attention_decode_kernel<128>, Smem<128>::kBytes);
  else
    launch(attention_decode_kernel<64>, Smem<64>::kBytes);
}

}  // namespace strata::cuda
