// Causal GQA attention for prefill, mixed and e4m3-cache decode steps on the tensor cores (flash
// attention over the paged cache): bf16 q/out, bf16 or e4m3 caches, head_dim 64 or 128, any
// q_len per sequence (decode rows are sequences with q_len 1).
//
// grid (query tiles x splits, kv heads, sequences), 8 warps. A block's 128 rows are (query,
// head) pairs that share one kv head (row r: query q0 + r / group, head kvh * group + r % group),
// so each K/V tile read is used by the whole GQA group; a warp owns 16 rows (one mma m16 tile).
// Query tiles run last tile first (the causal tiles with the most keys start first). Keys stream
// in tiles of 128, computed in steps of 64 keys with one online-softmax update each, up to the
// block's last query position: bf16 tiles through a cp.async pipeline of two stages, one barrier
// per tile; e4m3 tiles converted to bf16 on the way in (exactly: e4m3 values are bf16 values;
// k_scale folds into the score scale, v_scale into the output). The variants measured against
// this shape (4 warps, 64-key tiles, three stages, two m16 tiles per warp, P in three bf16 parts)
// and removed after: docs/BENCHMARKS.md, "Flash attention for prefill".
//   S = Q K^T       mma m16n8k16 bf16 -> f32, Q fragments kept in registers, K fragments by
//                   ldmatrix.x4 (two k16 steps of one n8 key tile)
//   online softmax  per row in f32 (exp2 with the scale folded in); the causal mask only on
//                   steps that reach past the block's first query or the split's end; steps
//                   wholly past the block's keys are skipped
//   O += P V        P in registers as one bf16 per probability, V fragments by ldmatrix.trans
//                   from the [key][dim] tile. transformers' eager attention (the reference
//                   model) casts the softmax probabilities to bf16 before P V too; the harness
//                   bounds the difference per element (cases_attention.cpp, bf16_p_bound).
// Split-K (flash-decoding): when the grid would have few blocks (decode rows, short chunks at
// long contexts), each query tile's keys are split into ranges of split_len (a multiple of the
// key tile); every split writes its rows' partial (max, sum, unnormalized output) in f32 and a
// second kernel merges them per (query, head).
// Fragment layouts: PTX ISA m16n8k16 (lane = 4 grp + tig). Shared rows are HD + 8 bf16 apart
// (a 16-byte pad): the 8 rows a fragment load or an ldmatrix touches land in distinct banks.
#include <algorithm>
#include <cfloat>

#include "ops/cuda/attention.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_bf16.cuh"

namespace strata::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kStages = 2;      // K/V tiles in shared memory: one in flight while one is used
constexpr int kTileKeys = 128;  // keys per K/V tile (one barrier each)
constexpr int kSub = 64;        // keys per score step (one online-softmax update each)
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Geo {
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRows = kWarps * 16;                     // (query, head) rows per block
  static constexpr int kLd = HD + 8;                            // shared row stride (bf16 elements)
  static constexpr int kTileElems = kTileKeys * kLd;            // one K or V tile
  static constexpr int kStageElems = 2 * kTileElems;            // K then V
  static constexpr int kSmemBytes = kStages * kStageElems * 2;  // bf16
  static constexpr int kKSteps = HD / 16;                       // k16 steps of a score
  static constexpr int kDimTiles = HD / 8;                      // n8 tiles of the output
  static constexpr int kUnits = HD / 8;                         // 16-byte units of a key row
  static constexpr int kRowsPerPass = kThreads / kUnits;        // key rows one loader pass fills
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Eight e4m3 codes (8 bytes) -> eight bf16 values (16 bytes), exactly (see linear_fp8_mma.cuh).
__device__ __forceinline__ uint4 e4m3x8_to_bf16(uint2 v) {
  auto two = [](uint32_t w, uint32_t& a, uint32_t& b) {
    const uint32_t t01 = __byte_perm(w, 0u, 0x1404), t23 = __byte_perm(w, 0u, 0x3424);
    const uint32_t m01 = ((t01 >> 4) & 0x07f007f0u) | (t01 & 0x80008000u);
    const uint32_t m23 = ((t23 >> 4) & 0x07f007f0u) | (t23 & 0x80008000u);
    constexpr uint32_t kTwo120 = 0x7b807b80u;  // bf16x2 (2^120, 2^120)
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(a) : "r"(m01), "r"(kTwo120));
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(b) : "r"(m23), "r"(kTwo120));
  };
  uint4 o;
  two(v.x, o.x, o.y);
  two(v.y, o.z, o.w);
  return o;
}

// FP8: e4m3 caches, else bf16.
template <int HD, bool FP8>
__global__ void __launch_bounds__(kWarps * 32, 1)
    flash_kernel(AttentionLaunch p, int bq, int split_len, int n_qtiles, int* errors) {
  using G = Geo<HD>;
  extern __shared__ __align__(16) bf16 fsm[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane >> 2, tig = lane & 3;
  const int kvh = blockIdx.y, b = blockIdx.z, group = static_cast<int>(p.n_heads / p.n_kv_heads);
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int q_start = cu[b], q_len = cu[b + 1] - cu[b];
  int ctx = static_cast<const int32_t*>(p.context_lens.p)[b];
  const int max_ctx = static_cast<int>(p.block_tables.cols * p.block_size);
  const int bs = static_cast<int>(p.block_size);
  if (threadIdx.x == 0 && blockIdx.x == 0 && kvh == 0 &&
      (q_len > p.max_q_len || ctx < q_len || ctx > max_ctx || q_len < 0))
    atomicAdd(errors, 1);  // inconsistent lengths: clamped below
  if (ctx > max_ctx) ctx = max_ctx;
  const int n_splits = static_cast<int>(p.n_splits);
  const int split = blockIdx.x % n_splits;
  // Query tiles in reverse: the last tiles of a causal sequence see the most keys, so they start
  // first and the short ones fill the tail of the grid.
  const int q0 = (n_qtiles - 1 - static_cast<int>(blockIdx.x) / n_splits) * bq;
  const int q_rows = min(bq, min(q_len, ctx) - q0);
  if (q_rows <= 0) return;
  const int first_pos = ctx - q_len + q0;  // position of the tile's first query
  // Keys k_begin .. k_end - 1: this split's range, up to the tile's last query position. A split
  // past it has no keys and leaves empty partials (max -FLT_MAX, sum 0).
  const int k_begin = split * split_len;
  const int k_end = min(first_pos + q_rows, k_begin + split_len);
  const int32_t* table = static_cast<const int32_t*>(p.block_tables.p) + b * p.block_tables.ld;
  // Row r of the block: query q0 + r / group, head kvh * group + r % group.
  auto q_of_row = [&](int r) {
    return static_cast<const bf16*>(p.q.p) +
           static_cast<int64_t>(q_start + q0 + r / group) * p.q.ld + (kvh * group + r % group) * HD;
  };

  // This thread's rows (grp, grp + 8 of the warp's m16 tile): valid, and the last key each
  // sees (its query's position; -1 for rows past the block's queries).
  auto row_valid = [&](int r) { return r < bq * group && r / group < q_rows; };
  int row_last[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + grp + 8 * h;
    row_last[h] = row_valid(r) ? first_pos + r / group : -1;
  }
  const bool warp_live = warp * 16 < q_rows * group;  // any valid row in this warp's tile

  // Q fragments qa[ks] over dims ks * 16 .. + 15, in registers for the whole kernel.
  uint32_t qa[G::kKSteps][4];
  {
    const bf16* qrow[2] = {q_of_row(warp * 16 + grp), q_of_row(warp * 16 + grp + 8)};
#pragma unroll
    for (int ks = 0; ks < G::kKSteps; ++ks) {
      const int d = ks * 16 + 2 * tig;
      qa[ks][0] = row_last[0] >= 0 ? *reinterpret_cast<const uint32_t*>(qrow[0] + d) : 0u;
      qa[ks][1] = row_last[1] >= 0 ? *reinterpret_cast<const uint32_t*>(qrow[1] + d) : 0u;
      qa[ks][2] = row_last[0] >= 0 ? *reinterpret_cast<const uint32_t*>(qrow[0] + d + 8) : 0u;
      qa[ks][3] = row_last[1] >= 0 ? *reinterpret_cast<const uint32_t*>(qrow[1] + d + 8) : 0u;
    }
  }

  // Tile loader: 16-byte units of bf16 (8 dims); a thread fills unit `uc` of key rows uj,
  // uj + kRowsPerPass, ...; key rows past k_end or with a bad page are zero.
  const int uc = threadIdx.x % G::kUnits, uj = threadIdx.x / G::kUnits;
  auto load_tile = [&](int stage, int k0) {
    bf16* sk = fsm + stage * G::kStageElems;
    bf16* sv = sk + G::kTileElems;
#pragma unroll
    for (int j = uj; j < kTileKeys; j += G::kRowsPerPass) {
      const int key = k0 + j;
      int64_t off = -1;
      if (key < k_end) {
        const int32_t page = table[key / bs];
        if (page < 0 || page >= p.num_blocks)
          atomicAdd(errors, 1);
        else
          off = ((static_cast<int64_t>(page) * bs + key % bs) * p.n_kv_heads + kvh) * HD + uc * 8;
      }
      if constexpr (FP8) {
        uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
        if (off >= 0) {
          kv = e4m3x8_to_bf16(
              *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.k_cache) + off));
          vv = e4m3x8_to_bf16(
              *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.v_cache) + off));
        }
        *reinterpret_cast<uint4*>(sk + j * G::kLd + uc * 8) = kv;
        *reinterpret_cast<uint4*>(sv + j * G::kLd + uc * 8) = vv;
      } else {
        const int n = off < 0 ? 0 : 16;
        const int64_t o = off < 0 ? 0 : off;
        cp_async16(sk + j * G::kLd + uc * 8, static_cast<const bf16*>(p.k_cache) + o, n);
        cp_async16(sv + j * G::kLd + uc * 8, static_cast<const bf16*>(p.v_cache) + o, n);
      }
    }
  };

  const float sscale = p.scale * p.k_scale * kLog2e;  // scores in the log2 domain
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.f, 0.f};
  float o[G::kDimTiles][4];
#pragma unroll
  for (int nt = 0; nt < G::kDimTiles; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      o[nt][i] = 0.f;

  // ldmatrix.x4 row addresses: K fragments (lanes 8i..8i+7: keys 0..7 at dims 8i..8i+7 of a
  // k32 pair of steps); V fragments (lanes 0-15: keys 0..15 at dims n0, lanes 16-31 the same
  // keys at dims n0 + 8).
  const int k_lane = (lane & 7) * G::kLd + (lane >> 3) * 8;
  const int v_lane = (lane & 15) * G::kLd + (lane >> 4) * 8;

  // The pipeline: kStages - 1 tiles in flight while one is computed; one barrier per tile.
  const int ntiles = k_end > k_begin ? (k_end - k_begin + kTileKeys - 1) / kTileKeys : 0;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < ntiles) load_tile(i, k_begin + i * kTileKeys);
    cp_async_commit();
  }
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile t landed
    // Tile t visible to every thread, and every warp is done with tile t - 1, whose stage the
    // next load refills.
    __syncthreads();
    const int next = t + kStages - 1;
    if (next < ntiles) load_tile(next % kStages, k_begin + next * kTileKeys);
    cp_async_commit();
    if (!warp_live) continue;
    const bf16* sk = fsm + (t % kStages) * G::kStageElems;
    const bf16* sv = sk + G::kTileElems;
    const int k0 = k_begin + t * kTileKeys;
    // The tile in steps of kSub keys, each with its own online-softmax update.
#pragma unroll
    for (int sub = 0; sub < kTileKeys / kSub; ++sub) {
      const int kc = k0 + sub * kSub;
      if (sub > 0 && kc >= k_end) break;  // past the block's keys (the tile's rows are zero)
      const bf16* skc = sk + sub * kSub * G::kLd;
      const bf16* svc = sv + sub * kSub * G::kLd;
      // S = Q K^T: kSub / 8 n8 tiles of keys (K fragments of two k16 steps per ldmatrix.x4),
      // k steps outer, key tiles inner: eight independent accumulator chains in flight.
      float s[kSub / 8][4];
#pragma unroll
      for (int nt = 0; nt < kSub / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          s[nt][i] = 0.f;
#pragma unroll
      for (int ks = 0; ks < G::kKSteps; ks += 2)
#pragma unroll
        for (int nt = 0; nt < kSub / 8; ++nt) {
          uint32_t kb[4];
          mma::ldsm_x4(kb, skc + nt * 8 * G::kLd + ks * 16 + k_lane);
          mma_bf16(s[nt], qa[ks], kb[0], kb[1]);
          mma_bf16(s[nt], qa[ks + 1], kb[2], kb[3]);
        }
      // Scale, mask, tile maxima (row h = 0: c[0], c[1]; h = 1: c[2], c[3]). A tile whose keys
      // all lie at or before the block's first query and inside the split sees no mask (rows
      // past the block's queries are never written).
      const bool full = kc + kSub - 1 <= first_pos && kc + kSub <= k_end;
      float tmax[2] = {-FLT_MAX, -FLT_MAX};
      if (full) {
#pragma unroll
        for (int nt = 0; nt < kSub / 8; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            s[nt][i] *= sscale;
            tmax[i >> 1] = fmaxf(tmax[i >> 1], s[nt][i]);
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < kSub / 8; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int h = i >> 1;
            const int key = kc + nt * 8 + 2 * tig + (i & 1);
            const bool ok = key <= row_last[h] && key < k_end;
            s[nt][i] = ok ? s[nt][i] * sscale : -FLT_MAX;
            tmax[h] = fmaxf(tmax[h], s[nt][i]);
          }
      }
      float corr[2], mref[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
        const float m_new = fmaxf(m[h], tmax[h]);
        // A row with no visible key yet keeps max -FLT_MAX: its p are 0 (masked) and corr 1.
        mref[h] = m_new == -FLT_MAX ? 0.f : m_new;
        corr[h] = m[h] == -FLT_MAX ? 1.f : exp2f(m[h] - m_new);
        m[h] = m_new;
      }
      float rsum[2] = {0.f, 0.f};
#pragma unroll
      for (int nt = 0; nt < kSub / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int h = i >> 1;
          s[nt][i] = s[nt][i] == -FLT_MAX ? 0.f : exp2f(s[nt][i] - mref[h]);
          rsum[h] += s[nt][i];
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        rsum[h] += __shfl_xor_sync(0xffffffffu, rsum[h], 1);
        rsum[h] += __shfl_xor_sync(0xffffffffu, rsum[h], 2);
        l[h] = l[h] * corr[h] + rsum[h];
      }
#pragma unroll
      for (int nt = 0; nt < G::kDimTiles; ++nt) {
        o[nt][0] *= corr[0];
        o[nt][1] *= corr[0];
        o[nt][2] *= corr[1];
        o[nt][3] *= corr[1];
      }
      // O += P V over 4 k16 steps of keys. The row sums l above add the f32 p; P V takes p
      // rounded to bf16.
#pragma unroll
      for (int kk = 0; kk < kSub / 16; ++kk) {
        uint32_t pa[4];
        const float pv[8] = {s[2 * kk][0],     s[2 * kk][1],     s[2 * kk][2],
                             s[2 * kk][3],     s[2 * kk + 1][0], s[2 * kk + 1][1],
                             s[2 * kk + 1][2], s[2 * kk + 1][3]};
#pragma unroll
        for (int r = 0; r < 4; ++r)
          pa[r] = mma::pack_bf16(pv[2 * r], pv[2 * r + 1]);
#pragma unroll
        for (int nt = 0; nt < G::kDimTiles; nt += 2) {
          uint32_t vb[4];
          mma::ldsm_x4_trans(vb, svc + kk * 16 * G::kLd + nt * 8 + v_lane);
          mma_bf16(o[nt], pa, vb[0], vb[1]);
          mma_bf16(o[nt + 1], pa, vb[2], vb[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Output rows: o / l * v_scale, bf16; or this split's partials.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + grp + 8 * h, qi = r / group, head = kvh * group + r % group;
    if (!row_valid(r)) continue;
    if (n_splits > 1) {
      const int64_t idx = (split * p.q.rows + q_start + q0 + qi) * p.n_heads + head;
      float* po = p.partials + 2 * p.n_splits * p.q.rows * p.n_heads + idx * HD;
      if (tig == 0) {
        p.partials[2 * idx] = m[h];
        p.partials[2 * idx + 1] = l[h];
      }
#pragma unroll
      for (int nt = 0; nt < G::kDimTiles; ++nt)
        *reinterpret_cast<float2*>(po + nt * 8 + 2 * tig) =
            make_float2(o[nt][2 * h], o[nt][2 * h + 1]);
      continue;
    }
    const float inv = l[h] > 0.f ? p.v_scale / l[h] : 0.f;
    bf16* out = static_cast<bf16*>(p.out.p) + static_cast<int64_t>(q_start + q0 + qi) * p.out.ld +
                head * HD;
#pragma unroll
    for (int nt = 0; nt < G::kDimTiles; ++nt)
      *reinterpret_cast<__nv_bfloat162*>(out + nt * 8 + 2 * tig) =
          __floats2bfloat162_rn(o[nt][2 * h] * inv, o[nt][2 * h + 1] * inv);
  }
}

// grid (max_q_len, sequences, n_heads), head_dim threads: merges the splits' partials of one
// (query, head) row, a dim per thread. Partials: (max in the log2 domain, sum) [S][T][n_heads],
// then outputs [S][T][n_heads][HD]; only queries the split kernel covered (inside the sequence
// and the context) are written.
__global__ void __launch_bounds__(128) flash_combine_kernel(AttentionLaunch p) {
  const int64_t qi = blockIdx.x, b = blockIdx.y, h = blockIdx.z, d = threadIdx.x;
  const int64_t S = p.n_splits, T = p.q.rows, HD = p.head_dim;
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int64_t q_start = cu[b], q_len = cu[b + 1] - cu[b];
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t ctx =
      min(static_cast<int64_t>(static_cast<const int32_t*>(p.context_lens.p)[b]), max_ctx);
  if (qi >= min(q_len, ctx)) return;
  const int64_t t = q_start + qi;
  const float* ml = p.partials;
  const float* po = p.partials + 2 * S * T * p.n_heads;
  float mx = -FLT_MAX;
  for (int64_t s = 0; s < S; ++s)
    mx = fmaxf(mx, ml[2 * ((s * T + t) * p.n_heads + h)]);
  float sum = 0.f, acc = 0.f;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t idx = (s * T + t) * p.n_heads + h;
    const float ls = ml[2 * idx + 1];
    if (ls <= 0.f) continue;  // no visible key in this split
    const float w = exp2f(ml[2 * idx] - mx);
    sum += w * ls;
    acc += w * po[idx * HD + d];
  }
  static_cast<bf16*>(p.out.p)[t * p.out.ld + h * HD + d] =
      __float2bfloat16_rn(sum > 0.f ? acc * p.v_scale / sum : 0.f);
}

template <int HD, bool FP8>
void launch_flash_for(const AttentionLaunch& p, int* errors, cudaStream_t s) {
  using G = Geo<HD>;
  auto* kernel = flash_kernel<HD, FP8>;
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [kernel] {
    STRATA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, G::kSmemBytes));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t group = p.n_heads / p.n_kv_heads, bq = G::kRows / group;
  const int64_t B = p.cu_seqlens_q.n - 1;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t S = p.n_splits > 1 ? p.n_splits : 1;
  const int64_t split_len =
      S > 1 ? ((max_ctx + S - 1) / S + kTileKeys - 1) / kTileKeys * kTileKeys : max_ctx + kTileKeys;
  const int64_t n_qtiles = (p.max_q_len + bq - 1) / bq;
  const dim3 grid(static_cast<unsigned>(n_qtiles * S), static_cast<unsigned>(p.n_kv_heads),
                  static_cast<unsigned>(B));
  kernel<<<grid, G::kThreads, G::kSmemBytes, s>>>(
      p, static_cast<int>(bq), static_cast<int>(split_len), static_cast<int>(n_qtiles), errors);
  STRATA_CUDA_LAUNCH_CHECK();
  if (S > 1) {
    const dim3 cgrid(static_cast<unsigned>(p.max_q_len), static_cast<unsigned>(B),
                     static_cast<unsigned>(p.n_heads));
    flash_combine_kernel<<<cgrid, HD, 0, s>>>(p);
    STRATA_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace

bool attention_flash_shape_supported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kFlashMaxGroup;
}

int64_t attention_flash_splits(const AttentionLaunch& p, int sms) {
  const int64_t group = p.n_heads / p.n_kv_heads, bq = Geo<64>::kRows / group;
  const int64_t B = p.cu_seqlens_q.n - 1;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  // Key tiles of the widest context: a split gets at least kFlashMinSplitKeys keys, or
  // kFlashMinPrefillSplitKeys when a sequence has several queries (each split writes and the
  // combine reads (HD + 2) f32 per (query, head): at 512 prompt tokens two splits of 256 keys
  // took 72 us where the unsplit grid took ~38).
  const int64_t min_keys = p.max_q_len > 1 ? kFlashMinPrefillSplitKeys : kFlashMinSplitKeys;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kFlashMaxSplits, max_ctx / min_keys));
  const int64_t forced = attention_splits_override();
  if (forced > 0) return std::min(forced, std::max<int64_t>(1, (max_ctx + kSub - 1) / kSub));
  // Blocks with queries, at most: every sequence's tiles (the packed rows, plus one partial tile
  // per sequence). Split only while they leave multiprocessors idle.
  const int64_t blocks = ((p.q.rows + bq - 1) / bq + B) * p.n_kv_heads;
  if (blocks >= sms) return 1;
  return std::min(most, (2 * static_cast<int64_t>(sms) + blocks - 1) / blocks);
}

int64_t attention_flash_partials_floats(const AttentionLaunch& p) {
  return p.n_splits > 1 ? p.n_splits * p.q.rows * p.n_heads * (2 + p.head_dim) : 0;
}

void launch_attention_flash(const AttentionLaunch& p, int* index_errors, void* stream) {
  const int64_t B = p.cu_seqlens_q.n - 1;
  if (p.q.rows == 0 || B <= 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (p.head_dim == 64)
    p.fp8_cache ? launch_flash_for<64, true>(p, index_errors, s)
                : launch_flash_for<64, false>(p, index_errors, s);
  else
    p.fp8_cache ? launch_flash_for<128, true>(p, index_errors, s)
                : launch_flash_for<128, false>(p, index_errors, s);
}

}  // namespace strata::cuda
