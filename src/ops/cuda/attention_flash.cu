// Causal GQA attention for prefill, mixed and e4m3-cache decode steps on the tensor cores (flash
// attention over the paged cache): bf16 q/out, bf16 or e4m3 caches, head_dim 64 or 128, any
// q_len per sequence (decode rows are sequences with q_len 1).
//
// grid (query tiles x splits, kv heads, sequences), 4 warps. A block's 64 rows are (query, head)
// pairs that share one kv head (row r: query q0 + r / group, head kvh * group + r % group), so
// each K/V tile read is used by the whole GQA group; a warp owns 16 rows (one mma m16 tile). Keys
// stream in tiles of 64 up to the block's last query position: bf16 tiles through a two-stage
// cp.async pipeline, e4m3 tiles converted to bf16 on the way in (exactly: e4m3 values are bf16
// values; k_scale folds into the score scale, v_scale into the output).
//   S = Q K^T       mma m16n8k16 bf16 -> f32, Q fragments kept in registers
//   online softmax  per row in f32 (exp2 with the scale folded in), causal mask per row
//   O += P V        P in registers as bf16 hi + mid + lo parts (three mmas: ~24 bits of P), V
//                   fragments by ldmatrix.trans from the [key][dim] tile
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

namespace strata::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kWarps * 16;  // (query, head) rows per block
constexpr int kKeys = 64;           // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Geo {
  static constexpr int kLd = HD + 8;                    // shared row stride (bf16 elements)
  static constexpr int kTileElems = kKeys * kLd;        // one K or V tile
  static constexpr int kStageElems = 2 * kTileElems;    // K then V
  static constexpr int kSmemBytes = 2 * kStageElems * 2;  // two stages, bf16
  static constexpr int kKSteps = HD / 16;               // k16 steps of a score
  static constexpr int kDimTiles = HD / 8;              // n8 tiles of the output
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

// B fragments of two n8 tiles (dims n0.., n0 + 8..) over keys k0..k0 + 15 of a [key][dim] tile.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float bf16_lo(uint32_t w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t w) {
  return __uint_as_float(w & 0xffff0000u);
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
__global__ void __launch_bounds__(kThreads)
    flash_kernel(AttentionLaunch p, int64_t bq, int64_t split_len, int* errors) {
  using G = Geo<HD>;
  extern __shared__ __align__(16) bf16 fsm[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane >> 2, tig = lane & 3;
  const int64_t kvh = blockIdx.y, b = blockIdx.z, group = p.n_heads / p.n_kv_heads;
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int64_t q_start = cu[b], q_len = cu[b + 1] - cu[b];
  int64_t ctx = static_cast<const int32_t*>(p.context_lens.p)[b];
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  if (threadIdx.x == 0 && blockIdx.x == 0 && kvh == 0 &&
      (q_len > p.max_q_len || ctx < q_len || ctx > max_ctx || q_len < 0))
    atomicAdd(errors, 1);  // inconsistent lengths: clamped below
  if (ctx > max_ctx) ctx = max_ctx;
  const int64_t split = blockIdx.x % p.n_splits;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x / p.n_splits) * bq;
  const int64_t q_rows = min(bq, min(q_len, ctx) - q0);
  if (q_rows <= 0) return;
  const int64_t first_pos = ctx - q_len + q0;  // position of the tile's first query
  // Keys k_begin .. k_end - 1: this split's range, up to the tile's last query position. A split
  // past it has no keys and leaves empty partials (max -FLT_MAX, sum 0).
  const int64_t k_begin = split * split_len;
  const int64_t k_end = min(first_pos + q_rows, k_begin + split_len);
  const int32_t* table = static_cast<const int32_t*>(p.block_tables.p) + b * p.block_tables.ld;

  // This thread's two rows (grp, grp + 8 of the warp's m16 tile): query index and validity.
  int64_t row_pos[2];
  bool row_ok[2];
  const bf16* qrow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = warp * 16 + grp + 8 * h, qi = r / group;
    row_ok[h] = r < bq * group && qi < q_rows;
    row_pos[h] = first_pos + qi;
    qrow[h] = static_cast<const bf16*>(p.q.p) + (q_start + q0 + qi) * p.q.ld +
              (kvh * group + r % group) * HD;
  }
  const bool warp_live = warp * 16 < q_rows * group;  // any valid row in this warp's tile

  // Q fragments: a[ks] over dims ks * 16 .. + 15.
  uint32_t qa[G::kKSteps][4];
#pragma unroll
  for (int ks = 0; ks < G::kKSteps; ++ks) {
    const int d = ks * 16 + 2 * tig;
    qa[ks][0] = row_ok[0] ? *reinterpret_cast<const uint32_t*>(qrow[0] + d) : 0u;
    qa[ks][1] = row_ok[1] ? *reinterpret_cast<const uint32_t*>(qrow[1] + d) : 0u;
    qa[ks][2] = row_ok[0] ? *reinterpret_cast<const uint32_t*>(qrow[0] + d + 8) : 0u;
    qa[ks][3] = row_ok[1] ? *reinterpret_cast<const uint32_t*>(qrow[1] + d + 8) : 0u;
  }

  // Tile loader: 16-byte units of bf16 (8 dims); key rows past k_end or with a bad page are zero.
  constexpr int kUnits = HD / 8;  // per key row
  auto page_of = [&](int64_t key) -> int64_t {
    if (key >= k_end) return -1;
    const int32_t page = table[key / p.block_size];
    if (page < 0 || page >= p.num_blocks) {
      atomicAdd(errors, 1);
      return -1;
    }
    return page;
  };
  auto load_tile = [&](int stage, int64_t k0) {
    bf16* sk = fsm + stage * G::kStageElems;
    bf16* sv = sk + G::kTileElems;
    for (int u = threadIdx.x; u < kKeys * kUnits; u += kThreads) {
      const int j = u / kUnits, c = u % kUnits;
      const int64_t key = k0 + j, page = page_of(key);
      const int64_t off =
          page < 0 ? 0
                   : ((page * p.block_size + key % p.block_size) * p.n_kv_heads + kvh) * HD +
                         c * 8;
      if constexpr (FP8) {
        uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
        if (page >= 0) {
          kv = e4m3x8_to_bf16(
              *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.k_cache) + off));
          vv = e4m3x8_to_bf16(
              *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.v_cache) + off));
        }
        *reinterpret_cast<uint4*>(sk + j * G::kLd + c * 8) = kv;
        *reinterpret_cast<uint4*>(sv + j * G::kLd + c * 8) = vv;
      } else {
        const int n = page < 0 ? 0 : 16;
        cp_async16(sk + j * G::kLd + c * 8, static_cast<const bf16*>(p.k_cache) + off, n);
        cp_async16(sv + j * G::kLd + c * 8, static_cast<const bf16*>(p.v_cache) + off, n);
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

  const int64_t ntiles = k_end > k_begin ? (k_end - k_begin + kKeys - 1) / kKeys : 0;
  if (ntiles > 0) load_tile(0, k_begin);
  cp_async_commit();
  for (int64_t t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      __syncthreads();  // the stage about to be refilled was consumed (tile t - 1)
      load_tile(static_cast<int>((t + 1) & 1), k_begin + (t + 1) * kKeys);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile t visible to every thread
    if (!warp_live) continue;
    const bf16* sk = fsm + (t & 1) * G::kStageElems;
    const bf16* sv = sk + G::kTileElems;
    const int64_t k0 = k_begin + t * kKeys;

    // S = Q K^T: 8 n8 tiles of keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        s[nt][i] = 0.f;
      const bf16* kr = sk + (nt * 8 + grp) * G::kLd + 2 * tig;
#pragma unroll
      for (int ks = 0; ks < G::kKSteps; ++ks)
        mma_bf16(s[nt], qa[ks], *reinterpret_cast<const uint32_t*>(kr + ks * 16),
                 *reinterpret_cast<const uint32_t*>(kr + ks * 16 + 8));
    }
    // Mask, scale, tile maxima (row h = 0: c[0], c[1]; h = 1: c[2], c[3]).
    float tmax[2] = {-FLT_MAX, -FLT_MAX};
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i >> 1;
        const int64_t key = k0 + nt * 8 + 2 * tig + (i & 1);
        const bool ok = row_ok[h] && key <= row_pos[h] && key < k_end;
        s[nt][i] = ok ? s[nt][i] * sscale : -FLT_MAX;
        tmax[h] = fmaxf(tmax[h], s[nt][i]);
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
    for (int nt = 0; nt < kKeys / 8; ++nt)
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
    // O += P V over 4 k16 steps of keys; P as three bf16 parts (hi + mid + lo: ~24 bits, so P
    // keeps f32's precision: two parts, ~16 bits, failed the harness on a cancelling output).
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const float pv[8] = {s[2 * kk][0],     s[2 * kk][1],     s[2 * kk][2],     s[2 * kk][3],
                           s[2 * kk + 1][0], s[2 * kk + 1][1], s[2 * kk + 1][2], s[2 * kk + 1][3]};
      uint32_t hi[4], mid[4], lo[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float x0 = pv[2 * r], x1 = pv[2 * r + 1];
        hi[r] = pack_bf16(x0, x1);
        const float y0 = x0 - bf16_lo(hi[r]), y1 = x1 - bf16_hi(hi[r]);
        mid[r] = pack_bf16(y0, y1);
        lo[r] = pack_bf16(y0 - bf16_lo(mid[r]), y1 - bf16_hi(mid[r]));
      }
      // ldmatrix.x4.trans: lanes 0-15 address keys kk*16 + (lane & 15) at dims n0, lanes 16-31
      // the same keys at dims n0 + 8: registers = (b0, b1) of tile n0, then of tile n0 + 8.
      const bf16* vbase = sv + (kk * 16 + (lane & 15)) * G::kLd + (lane >> 4) * 8;
#pragma unroll
      for (int nt = 0; nt < G::kDimTiles; nt += 2) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vbase + nt * 8);
        mma_bf16(o[nt], hi, vb[0], vb[1]);
        mma_bf16(o[nt], mid, vb[0], vb[1]);
        mma_bf16(o[nt], lo, vb[0], vb[1]);
        mma_bf16(o[nt + 1], hi, vb[2], vb[3]);
        mma_bf16(o[nt + 1], mid, vb[2], vb[3]);
        mma_bf16(o[nt + 1], lo, vb[2], vb[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Output rows: o / l * v_scale, bf16; or this split's partials.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!row_ok[h]) continue;
    const int64_t r = warp * 16 + grp + 8 * h, qi = r / group, head = kvh * group + r % group;
    if (p.n_splits > 1) {
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
    bf16* out = static_cast<bf16*>(p.out.p) + (q_start + q0 + qi) * p.out.ld + head * HD;
#pragma unroll
    for (int nt = 0; nt < G::kDimTiles; ++nt)
      *reinterpret_cast<__nv_bfloat162*>(out + nt * 8 + 2 * tig) =
          __floats2bfloat162_rn(o[nt][2 * h] * inv, o[nt][2 * h + 1] * inv);
  }
}

// grid (max_q_len, sequences), 128 threads: merges the splits' partials of one query's rows (all
// heads). Partials: (max in the log2 domain, sum) [S][T][n_heads], then outputs
// [S][T][n_heads][HD]; only queries the split kernel covered (inside the sequence and the
// context) are written.
__global__ void __launch_bounds__(128) flash_combine_kernel(AttentionLaunch p) {
  const int64_t qi = blockIdx.x, b = blockIdx.y, S = p.n_splits, T = p.q.rows, HD = p.head_dim;
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int64_t q_start = cu[b], q_len = cu[b + 1] - cu[b];
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t ctx = min(static_cast<int64_t>(static_cast<const int32_t*>(p.context_lens.p)[b]),
                          max_ctx);
  if (qi >= min(q_len, ctx)) return;
  const int64_t t = q_start + qi;
  const float* ml = p.partials;
  const float* po = p.partials + 2 * S * T * p.n_heads;
  for (int64_t e = threadIdx.x; e < p.n_heads * HD; e += blockDim.x) {
    const int64_t h = e / HD, d = e - h * HD;
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
}

template <int HD, bool FP8>
void launch_flash_for(const AttentionLaunch& p, int* errors, cudaStream_t s) {
  using G = Geo<HD>;
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [] {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(
        flash_kernel<HD, FP8>, cudaFuncAttributeMaxDynamicSharedMemorySize, G::kSmemBytes));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(flash_kernel<HD, FP8>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t group = p.n_heads / p.n_kv_heads, bq = kRows / group;
  const int64_t B = p.cu_seqlens_q.n - 1;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t S = p.n_splits > 1 ? p.n_splits : 1;
  const int64_t split_len =
      S > 1 ? ((max_ctx + S - 1) / S + kKeys - 1) / kKeys * kKeys : max_ctx + kKeys;
  const dim3 grid(static_cast<unsigned>((p.max_q_len + bq - 1) / bq * S),
                  static_cast<unsigned>(p.n_kv_heads), static_cast<unsigned>(B));
  flash_kernel<HD, FP8><<<grid, kThreads, G::kSmemBytes, s>>>(p, bq, split_len, errors);
  STRATA_CUDA_LAUNCH_CHECK();
  if (S > 1) {
    flash_combine_kernel<<<dim3(static_cast<unsigned>(p.max_q_len), static_cast<unsigned>(B)), 128,
                           0, s>>>(p);
    STRATA_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace

bool attention_flash_shape_supported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kRows;
}

int64_t attention_flash_splits(const AttentionLaunch& p, int sms) {
  const int64_t group = p.n_heads / p.n_kv_heads, bq = kRows / group;
  const int64_t B = p.cu_seqlens_q.n - 1;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  // Key tiles of the widest context: a split gets at least kFlashMinSplitKeys keys.
  const int64_t most = std::max<int64_t>(
      1, std::min<int64_t>(kFlashMaxSplits, max_ctx / kFlashMinSplitKeys));
  const int64_t forced = attention_splits_override();
  if (forced > 0) return std::min(forced, std::max<int64_t>(1, (max_ctx + kKeys - 1) / kKeys));
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
