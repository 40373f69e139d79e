// Causal GQA attention over the paged cache with an online (flash-style) softmax: the general
// kernel family (prefill, chunked prefill, decode; f32 and bf16; any head_dim 1..256).
// A block serves one sequence, one kv head and a tile of queries: its rows are the (query,
// q head) pairs that share that kv head, so each K/V tile read from the cache is used by every
// head of the group. Keys stream in tiles of kKeyTile through shared memory (converted to f32);
// each warp owns rows: lane j scores key j of the tile, then the warp rescales its running
// output (lane d-slice of head_dim) by the new maximum and adds P.V.
// head_dim: lane owns DPL consecutive dims of a row padded to HDP = 32 * DPL (DPL 1, 2, 4, 8 for
// head_dim up to 32, 64, 128, 256). Padding dims are zero in shared memory (they add nothing to
// the scores) and masked at the output. K/V rows are read with one DPL-wide vector load per
// lane when head_dim is a multiple of DPL (lanes past head_dim idle), element by element
// otherwise.
// An e4m3 cache (FP8 KV) is read as f32(code) * k_scale (v_scale) into shared memory; the rest
// of the kernel does not see the cache dtype.
// Decode (one query per sequence) splits the context over blocks (split-K) and a second kernel
// merges the partial (max, sum, output) triples. The bf16 decode of the real models has its own
// faster kernel (attention_decode.cu).
#include <cfloat>
#include <type_traits>

#include "ops/cuda/attention.h"
#include "ops/cuda/common.cuh"

namespace strata::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kKeyTile = 32;
constexpr int kMaxRowsPerWarp = 8;
constexpr int kMaxRows = kWarps * kMaxRowsPerWarp;  // (query, head) rows per block

// DPL consecutive values of one K or V row, read with one vector load.
template <class T, int DPL>
struct alignas(DPL * sizeof(T)) Slice {
  T v[DPL];
};

// A cache value as f32: e4m3 codes (uint8_t) through the hardware conversion, else to_f32.
template <class TC>
__device__ __forceinline__ float cache_f32(TC v) {
  if constexpr (std::is_same_v<TC, uint8_t>)
    return fp8_to_f32(v);
  else
    return to_f32(v);
}
template <class TC>
__device__ __forceinline__ TC cache_zero() {
  if constexpr (std::is_same_v<TC, uint8_t>)
    return 0;
  else
    return from_f32<TC>(0.f);
}

int64_t queries_per_block(const AttentionLaunch& p) {
  const int64_t group = p.n_heads / p.n_kv_heads;
  if (p.max_q_len <= 1) return 1;
  const int64_t bq = kMaxRows / group;
  return bq < 1 ? 1 : bq;
}

// Dims per lane: the padded row HDP = 32 * DPL holds head_dim.
int dims_per_lane(int64_t head_dim) {
  return head_dim <= 32 ? 1 : head_dim <= 64 ? 2 : head_dim <= 128 ? 4 : 8;
}

size_t smem_bytes(const AttentionLaunch& p) {
  const int64_t rows = queries_per_block(p) * (p.n_heads / p.n_kv_heads);
  const int64_t hdp = 32 * dims_per_lane(p.head_dim);
  return static_cast<size_t>(rows * hdp + kKeyTile * (hdp + 1) + kKeyTile * hdp) * sizeof(float);
}

// vec_loads: head_dim % DPL == 0 and both caches aligned to DPL elements (checked by the
// launcher), so a lane's DPL dims of a K/V row are one aligned vector. T: q and out; TC: the
// caches (T, or uint8_t for e4m3).
template <class T, class TC, int DPL>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(AttentionLaunch p, int64_t bq, int64_t split_len, bool vec_loads,
                     int* errors) {
  constexpr int HD = DPL * 32;  // padded row width in shared memory
  const int64_t hd = p.head_dim;
  extern __shared__ float sh[];
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t rows = bq * group;
  float* qs = sh;                        // [rows][HD], pre-scaled, zero past hd
  float* ks = qs + rows * HD;            // [kKeyTile][HD + 1] (padded: lanes read columns)
  float* vs = ks + kKeyTile * (HD + 1);  // [kKeyTile][HD]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t split = blockIdx.x % p.n_splits, qtile = blockIdx.x / p.n_splits;
  const int64_t kvh = blockIdx.y, b = blockIdx.z;
  const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens_q.p);
  const int64_t q_start = cu[b], q_len = cu[b + 1] - cu[b];
  int64_t ctx = static_cast<const int32_t*>(p.context_lens.p)[b];
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  if (threadIdx.x == 0 && qtile == 0 && split == 0 && kvh == 0 &&
      (q_len > p.max_q_len || ctx < q_len || ctx > max_ctx || q_len < 0))
    atomicAdd(errors, 1);  // inconsistent lengths: clamp below, rows without keys give zeros
  if (ctx > max_ctx) ctx = max_ctx;
  const int64_t q0 = qtile * bq;  // first query of the tile within the sequence
  if (q0 >= q_len || q0 >= p.max_q_len) return;
  const int64_t q_rows = min(bq, min(q_len, p.max_q_len) - q0);

#pragma unroll 8
  for (int64_t e = threadIdx.x; e < rows * HD;
       e += blockDim.x) {  // unrolled: loads in flight together
    const int64_t r = e / HD, d = e % HD, qi = r / group, h = kvh * group + r % group;
    qs[e] = qi < q_rows && d < hd
                ? to_f32(static_cast<const T*>(p.q.p)[(q_start + q0 + qi) * p.q.ld + h * hd + d]) *
                      p.scale
                : 0.f;
  }

  // Keys this block may need: up to the last query's position, within its split.
  const int64_t last_pos = ctx - q_len + q0 + q_rows - 1;
  const int64_t k_begin = split * split_len;
  const int64_t k_end = min(last_pos + 1, (split + 1) * split_len);

  float m[kMaxRowsPerWarp], l[kMaxRowsPerWarp], acc[kMaxRowsPerWarp][DPL];
#pragma unroll
  for (int i = 0; i < kMaxRowsPerWarp; ++i) {
    m[i] = -FLT_MAX;
    l[i] = 0.f;
#pragma unroll
    for (int d = 0; d < DPL; ++d)
      acc[i][d] = 0.f;
  }

  const TC* kc = static_cast<const TC*>(p.k_cache);
  const TC* vc = static_cast<const TC*>(p.v_cache);
  const int32_t* table = static_cast<const int32_t*>(p.block_tables.p) + b * p.block_tables.ld;

  // K/V tiles: warp w fetches keys w, w + 8, w + 16, w + 24 of a tile, each lane a DPL-wide
  // slice of the K and V rows, into registers; the next tile's fetch is issued before the
  // current tile is scored, so memory latency overlaps the arithmetic. Dims past hd are zero.
  constexpr int kKeysPerWarp = kKeyTile / kWarps;
  const int64_t d0 = static_cast<int64_t>(lane) * DPL;  // this lane's first dim
  Slice<TC, DPL> kr[kKeysPerWarp], vr[kKeysPerWarp];
  auto fetch = [&](int64_t tile0) {
#pragma unroll
    for (int i = 0; i < kKeysPerWarp; ++i) {
      const int64_t key = tile0 + warp + i * kWarps;
      int32_t page = -1;
      if (key < k_end) {
        page = table[key / p.block_size];
        if (page < 0 || page >= p.num_blocks) {
          if (lane == 0) atomicAdd(errors, 1);
          page = -1;
        }
      }
      if (page >= 0 && d0 < hd) {
        const int64_t off =
            ((static_cast<int64_t>(page) * p.block_size + key % p.block_size) * p.n_kv_heads +
             kvh) *
                hd +
            d0;
        if (vec_loads) {
          kr[i] = *reinterpret_cast<const Slice<TC, DPL>*>(kc + off);
          vr[i] = *reinterpret_cast<const Slice<TC, DPL>*>(vc + off);
        } else {
#pragma unroll
          for (int d = 0; d < DPL; ++d) {
            const bool in = d0 + d < hd;
            kr[i].v[d] = in ? kc[off + d] : cache_zero<TC>();
            vr[i].v[d] = in ? vc[off + d] : cache_zero<TC>();
          }
        }
      } else {
#pragma unroll
        for (int d = 0; d < DPL; ++d)
          kr[i].v[d] = vr[i].v[d] = cache_zero<TC>();
      }
    }
  };
  if (k_begin < k_end) fetch(k_begin);
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile is consumed (and qs is written, first time round)
#pragma unroll
    for (int i = 0; i < kKeysPerWarp; ++i) {
      const int j = warp + i * kWarps;
#pragma unroll
      for (int d = 0; d < DPL; ++d) {
        ks[j * (HD + 1) + lane * DPL + d] = cache_f32(kr[i].v[d]) * p.k_scale;
        vs[j * HD + lane * DPL + d] = cache_f32(vr[i].v[d]) * p.v_scale;
      }
    }
    __syncthreads();
    if (k0 + kKeyTile < k_end) fetch(k0 + kKeyTile);
    const int64_t key = k0 + lane;
#pragma unroll
    for (int i = 0; i < kMaxRowsPerWarp; ++i) {
      const int64_t r = warp + static_cast<int64_t>(i) * kWarps;
      if (r >= rows || r / group >= q_rows) continue;
      const int64_t pos = ctx - q_len + q0 + r / group;  // this query's position in the context
      const float* qr = qs + r * HD;
      float s = 0.f;
#pragma unroll 8
      for (int d = 0; d < HD; ++d)
        s = fmaf(qr[d], ks[lane * (HD + 1) + d], s);
      const bool valid = key < k_end && key <= pos;
      const float tile_max = warp_max(valid ? s : -FLT_MAX);
      if (tile_max == -FLT_MAX) continue;  // no visible key in this tile for this row
      const float m_new = fmaxf(m[i], tile_max);
      const float pj = valid ? expf(s - m_new) : 0.f;
      const float corr = expf(m[i] - m_new);
      l[i] = l[i] * corr + warp_sum(pj);
      m[i] = m_new;
#pragma unroll
      for (int d = 0; d < DPL; ++d)
        acc[i][d] *= corr;
      for (int j = 0; j < kKeyTile; ++j) {
        const float pb = __shfl_sync(0xffffffffu, pj, j);
        const float* vr = vs + j * HD + lane * DPL;
#pragma unroll
        for (int d = 0; d < DPL; ++d)
          acc[i][d] = fmaf(pb, vr[d], acc[i][d]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kMaxRowsPerWarp; ++i) {
    const int64_t r = warp + static_cast<int64_t>(i) * kWarps;
    if (r >= rows || r / group >= q_rows) continue;
    const int64_t t = q_start + q0 + r / group, h = kvh * group + r % group;
    if (p.n_splits == 1) {
      const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
      T* o = static_cast<T*>(p.out.p) + t * p.out.ld + h * hd + d0;
#pragma unroll
      for (int d = 0; d < DPL; ++d)
        if (d0 + d < hd) o[d] = from_f32<T>(acc[i][d] * inv);
    } else {
      // partials: [split][t][head] (max, sum) then [split][t][head][HD] outputs
      const int64_t T_ = p.q.rows, idx = (split * T_ + t) * p.n_heads + h;
      float* ml = p.partials;
      float* po = p.partials + 2 * p.n_splits * T_ * p.n_heads;
      if (lane == 0) {
        ml[2 * idx] = m[i];
        ml[2 * idx + 1] = l[i];
      }
#pragma unroll
      for (int d = 0; d < DPL; ++d)
        if (d0 + d < hd) po[idx * hd + d0 + d] = acc[i][d];
    }
  }
  // Rows of a split past the visible keys still leave a partial: (max -FLT_MAX, sum 0) above.
}

// grid (T, n_heads), block head_dim rounded up to whole warps (the reductions shuffle over full
// warps; threads past head_dim only help reduce): merges the splits of one (token, head). The
// splits' weights exp(m_s - max) are computed once, in parallel, in shared memory.
template <class T>
__global__ void attention_combine_kernel(AttentionLaunch p) {
  extern __shared__ float wsh[];  // [S] split weights, then [32] reduction scratch
  const int64_t t = blockIdx.x, h = blockIdx.y, HD = p.head_dim, T_ = p.q.rows, S = p.n_splits;
  const float* ml = p.partials;
  const float* po = p.partials + 2 * S * T_ * p.n_heads;
  float* red = wsh + S;
  float mx = -FLT_MAX;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x)
    mx = fmaxf(mx, ml[2 * ((s * T_ + t) * p.n_heads + h)]);
  mx = warp_max(mx);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = -FLT_MAX;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w)
    mx = fmaxf(mx, red[w]);
  float lsum = 0.f;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    const int64_t idx = (s * T_ + t) * p.n_heads + h;
    const float ls = ml[2 * idx + 1];
    const float w = ls > 0.f ? expf(ml[2 * idx] - mx) : 0.f;
    wsh[s] = w;
    lsum += w * ls;
  }
  __syncthreads();
  lsum = warp_sum(lsum);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = lsum;
  __syncthreads();
  float sum = 0.f;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w)
    sum += red[w];
  if (threadIdx.x >= HD) return;
  float o = 0.f;
#pragma unroll 8
  for (int64_t s = 0; s < S; ++s)
    if (wsh[s] > 0.f) o += wsh[s] * po[((s * T_ + t) * p.n_heads + h) * HD + threadIdx.x];
  static_cast<T*>(p.out.p)[t * p.out.ld + h * HD + threadIdx.x] =
      from_f32<T>(sum > 0.f ? o / sum : 0.f);
}

// Marks every partial as empty, so splits that exit early (past the context) merge as nothing.
__global__ void clear_partials_kernel(float* ml, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    ml[2 * i] = -FLT_MAX;
    ml[2 * i + 1] = 0.f;
  }
}

}  // namespace

bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim >= 1 && head_dim <= kAttentionMaxHeadDim;
}

int64_t attention_decode_splits(const AttentionLaunch& p, int sms) {
  const int64_t B = p.cu_seqlens_q.n - 1;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  const int64_t blocks = B * p.n_kv_heads;
  int64_t splits = (2 * sms + blocks - 1) / blocks;
  const int64_t most = (max_ctx + 2 * kKeyTile - 1) /
                       (2 * kKeyTile);  // >= 2 key tiles per split: fetch overlaps scoring
  if (splits > most) splits = most;
  return splits < 1 ? 1 : splits;
}

int64_t attention_partials_floats(const AttentionLaunch& p) {
  return p.n_splits * p.q.rows * p.n_heads * (2 + p.head_dim);
}

void launch_attention(const AttentionLaunch& p, int* index_errors, void* stream) {
  const int64_t B = p.cu_seqlens_q.n - 1;
  if (p.q.rows == 0 || B <= 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t bq = queries_per_block(p);
  const int64_t qtiles = (p.max_q_len + bq - 1) / bq;
  const int64_t max_ctx = p.block_tables.cols * p.block_size;
  int64_t split_len = (max_ctx + p.n_splits - 1) / p.n_splits;
  split_len = (split_len + kKeyTile - 1) / kKeyTile * kKeyTile;
  const size_t smem = smem_bytes(p);
  if (p.n_splits > 1) {
    const int64_t n = p.n_splits * p.q.rows * p.n_heads;
    clear_partials_kernel<<<grid_1d(n, 256) < 1024 ? grid_1d(n, 256) : 1024, 256, 0, s>>>(
        p.partials, n);
    STRATA_CUDA_LAUNCH_CHECK();
  }
  dim3 grid(static_cast<unsigned>(qtiles * p.n_splits), static_cast<unsigned>(p.n_kv_heads),
            static_cast<unsigned>(B));
  const int dpl = dims_per_lane(p.head_dim);
  with_act(p.q.dt, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto cache_tag) {
      using TC = decltype(cache_tag);
      const size_t vec_bytes = static_cast<size_t>(dpl) * sizeof(TC);
      const bool vec_loads = p.head_dim % dpl == 0 &&
                             reinterpret_cast<uintptr_t>(p.k_cache) % vec_bytes == 0 &&
                             reinterpret_cast<uintptr_t>(p.v_cache) % vec_bytes == 0;
      auto kernel = dpl == 1   ? attention_kernel<T, TC, 1>
                    : dpl == 2 ? attention_kernel<T, TC, 2>
                    : dpl == 4 ? attention_kernel<T, TC, 4>
                               : attention_kernel<T, TC, 8>;
      if (smem > 48 * 1024)
        STRATA_CUDA_CHECK(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      kernel<<<grid, kWarps * 32, smem, s>>>(p, bq, split_len, vec_loads, index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    };
    if (p.fp8_cache)
      run(uint8_t{});
    else
      run(T{});
    if (p.n_splits > 1) {
      const auto threads = static_cast<unsigned>((p.head_dim + 31) / 32 * 32);
      attention_combine_kernel<T>
          <<<dim3(static_cast<unsigned>(p.q.rows), static_cast<unsigned>(p.n_heads)), threads,
             (p.n_splits + 32) * sizeof(float), s>>>(p);
      STRATA_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace strata::cuda
