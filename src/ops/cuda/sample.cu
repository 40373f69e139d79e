// The device sampler: the host sampler's rules (ops/host/sample.cpp) with the arithmetic of
// ops/sampling_math.h, so the two pick the same token for a row (a pick can only differ when
// two Gumbel race values agree to ~1e-16, or a top_p boundary falls within f64 rounding of the
// f64 cumulative mass, which sums in another order here).
//
// Kernels, one block per row, B rows at any B (parameters as kernel arguments, 256 rows per
// launch):
//   scan_kernel (every row): one pass over the raw logits, which checks them for NaN / inf
//     (the non-finite flag), applies the row's sparse entries (a bitmap of the listed tokens
//     in shared memory skips them in the dense loop; a second loop over the entries supplies
//     their processed values), and reduces what the row needs:
//       greedy rows: argmax only. Cost: one read of V floats.
//       race rows (temperature, no top_k / top_p): the Gumbel race, argmax of z / T + noise
//         (a 64-bit hash per token, and two f64 logs for the tokens that can still win: a
//         token more than 4 below the thread's best skips them 98% of the time; no sort, no
//         prefix sum). Cost: one read of V floats; min_p rows need the row maximum first: a
//         second read.
//       logprob rows: an online log-sum-exp of z / T and a per-thread top-k list (k <= 20)
//         merged in k block reductions.
//   sorted path (rows with top_k or top_p only), in chunks of <= 64 rows and 4 Mi logits:
//     sort_keys_kernel writes the processed logits, a CUB segmented radix sort (stable,
//     descending: equal logits keep ascending ids, the host's order) sorts them,
//     sorted_draw_kernel cuts min_p / top_k / top_p on the sorted prefix (f64 masses) and runs
//     the race over the kept prefix. Cost: the sort (~8 passes over 8-byte pairs) per row.
//   rank_kernel (logprob rows only): the sampled token's logprob and rank, one more read.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/sample.h"
#include "ops/sampling_math.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// Status of a row, kept in scratch for the later kernels.
constexpr int32_t kOk = 0, kNonFinite = 1, kAllBanned = 2;

// The larger x wins; ties go to the lower token id; v < 0 is "none".
struct Best {
  double x;
  long long v;
};

__device__ __forceinline__ Best better_of(Best a, Best b) {
  if (b.v < 0) return a;
  if (a.v < 0) return b;
  return (b.x > a.x || (b.x == a.x && b.v < a.v)) ? b : a;
}

__device__ __forceinline__ Best warp_best(Best a) {
  for (int o = 16; o > 0; o >>= 1)
    a = better_of(a,
                  Best{__shfl_xor_sync(0xffffffffu, a.x, o), __shfl_xor_sync(0xffffffffu, a.v, o)});
  return a;
}

// Every thread gets the block's best. `sh` holds kWarps entries.
__device__ Best block_best(Best a, Best* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = warp_best(a);
  if (lane == 0) sh[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < kWarps ? sh[lane] : Best{-INFINITY, -1};
    a = warp_best(a);
    if (lane == 0) sh[0] = a;
  }
  __syncthreads();
  const Best r = sh[0];
  __syncthreads();
  return r;
}

// Every thread gets the block's sum, added in thread order (deterministic).
__device__ double block_sum(double s, double* sh) {
  sh[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0.0;
    for (int t = 0; t < kThreads; ++t)
      run += sh[t];
    sh[0] = run;
  }
  __syncthreads();
  const double total = sh[0];
  __syncthreads();
  return total;
}

// One row as a block sees it: raw logits, its sparse entries, and the bitmap of listed tokens.
struct RowView {
  const float* raw;
  int64_t V;
  int64_t e0, e1;
  const uint32_t* bits;  // null when the row has no entries
};

// The launch-wide pointers the row kernels need.
struct Inputs {
  Mat logits;
  const int32_t* offsets;
  const int32_t* tokens;
  const int32_t* counts;
  const int32_t* in_prompt;
  const float* bias;
};

// Offers token v (processed logit z) to a thread's race. Tokens whose z / T is more than 4
// below the thread's best race value are skipped without the logs when their uniform is <= 0.98
// (they cannot win: ops::kGumbelSkipGap): exact, and most tokens of a peaked row skip.
__device__ __forceinline__ void race_offer(Best& best, float z, float T, uint64_t key, int64_t v) {
  const double a = static_cast<double>(ops::div_rn(z, T));
  const double u = ops::gumbel_uniform(key, v);
  if (best.v >= 0 && a < best.x - ops::kGumbelSkipGap && u <= ops::kGumbelSkipUniform) return;
  best = better_of(best, Best{a + -log(-log(u)), v});  // ops::race_value, the same operations
}

// Sets up row b's view; builds the bitmap in `bits` (shared, (V + 31) / 32 words) when the row
// has entries. Entries outside the vocabulary count an index error and are skipped.
__device__ RowView row_view(const Inputs& in, int64_t b, uint32_t* bits, int* index_errors) {
  RowView r;
  r.raw = static_cast<const float*>(in.logits.p) + b * in.logits.ld;
  r.V = in.logits.cols;
  r.e0 = in.offsets ? in.offsets[b] : 0;
  r.e1 = in.offsets ? in.offsets[b + 1] : 0;
  r.bits = nullptr;
  if (r.e1 > r.e0) {  // uniform across the block
    const int64_t words = (r.V + 31) / 32;
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x)
      bits[w] = 0u;
    __syncthreads();
    for (int64_t e = r.e0 + threadIdx.x; e < r.e1; e += blockDim.x) {
      const int32_t t = in.tokens[e];
      if (t < 0 || t >= r.V)
        atomicAdd(index_errors, 1);
      else
        atomicOr(&bits[t >> 5], 1u << (t & 31));
    }
    __syncthreads();
    r.bits = bits;
  }
  return r;
}

// Calls f(v, z_v, raw_v) once for every token v of the row (in no particular order across
// threads), z_v the processed logit.
template <class F>
__device__ void for_each_token(const Inputs& in, const RowView& r, const SampleRow& row, F f) {
  for (int64_t v = threadIdx.x; v < r.V; v += blockDim.x) {
    const float raw = r.raw[v];
    if (r.bits && ((r.bits[v >> 5] >> (v & 31)) & 1u)) continue;  // listed: the loop below
    f(v, ops::plain_logit(raw), raw);
  }
  for (int64_t e = r.e0 + threadIdx.x; e < r.e1; e += blockDim.x) {
    const int32_t t = in.tokens[e];
    if (t < 0 || t >= r.V) continue;
    const float raw = r.raw[t];
    f(t,
      ops::processed_logit(raw, in.bias[e], in.counts[e], in.in_prompt[e] != 0, row.presence,
                           row.frequency, row.repetition),
      raw);
  }
}

// A thread's k best (z', v) pairs, best first (z' descending, ties by lower id).
struct TopList {
  float x[ops::kMaxSampleLogprobs];
  int32_t v[ops::kMaxSampleLogprobs];
  int n = 0;
  __device__ void offer(float xv, int32_t vv, int k) {
    int i = n < k ? n : k - 1;
    if (n == k && !(xv > x[i] || (xv == x[i] && vv < v[i]))) return;
    while (i > 0 && (xv > x[i - 1] || (xv == x[i - 1] && vv < v[i - 1]))) {
      x[i] = x[i - 1];
      v[i] = v[i - 1];
      --i;
    }
    x[i] = xv;
    v[i] = vv;
    if (n < k) ++n;
  }
};

struct Outputs {
  int32_t* ids;
  int32_t* nonfinite;
  float* sampled_logprob;
  int32_t* sampled_rank;
  int32_t* top_ids;
  float* top_logprobs;
  int64_t top_width;
  int32_t* status;  // scratch [B]
  double* lse;      // scratch [B]
};

__global__ void __launch_bounds__(kThreads)
    scan_kernel(Inputs in, Outputs out, int64_t row0, SampleRowsParam rows, int* index_errors) {
  extern __shared__ uint32_t bits[];
  __shared__ Best sh_best[kWarps];
  __shared__ double sh_sum[kThreads];
  const int64_t b = row0 + blockIdx.x;
  const SampleRow row = rows.rows[blockIdx.x];
  const RowView r = row_view(in, b, bits, index_errors);
  const bool race_now = row.path == ops::kPathRace && row.log_min_p == -INFINITY;
  const bool want_lp = row.num_logprobs >= 0;
  const int k = row.num_logprobs;
  const float t_lp = row.path == ops::kPathGreedy ? 1.f : row.temperature;

  bool bad = false;
  Best top{-INFINITY, -1}, drawn{-INFINITY, -1};
  float lm = -INFINITY, ls = 0.f;  // online log-sum-exp of z / t_lp: max, sum of exp(. - max)
  TopList list;
  for_each_token(in, r, row, [&](int64_t v, float z, float raw) {
    bad |= !isfinite(raw);
    top = better_of(top, Best{z, v});
    if (race_now) race_offer(drawn, z, row.temperature, row.key, v);
    if (want_lp) {
      const float zs = ops::div_rn(z, t_lp);
      if (zs > lm) {
        ls = ls * expf(lm - zs) + 1.f;
        lm = zs;
      } else if (zs > -INFINITY) {
        ls += expf(zs - lm);
      }
      if (k > 0) list.offer(zs, static_cast<int32_t>(v), k);
    }
  });
  bad = __syncthreads_or(bad);
  top = block_best(top, sh_best);
  int32_t status = bad ? kNonFinite : (top.x == -INFINITY ? kAllBanned : kOk);

  if (status == kOk && row.path == ops::kPathRace) {
    if (!race_now) {  // min_p: the threshold needs the maximum, so the race is a second pass
      const float m = static_cast<float>(top.x);
      for_each_token(in, r, row, [&](int64_t v, float z, float) {
        if (ops::scaled_logit(z, m, row.temperature) >= row.log_min_p)
          race_offer(drawn, z, row.temperature, row.key, v);
      });
    }
    drawn = block_best(drawn, sh_best);
  }

  double lse = 0.0;
  if (want_lp && status == kOk) {  // block-uniform branch
    const Best m = block_best(Best{lm, lm > -INFINITY ? 0 : -1}, sh_best);
    const double part =
        lm > -INFINITY ? static_cast<double>(ls) * exp(static_cast<double>(lm) - m.x) : 0.0;
    lse = m.x + log(block_sum(part, sh_sum));
    int ptr = 0;
    for (int i = 0; i < k && i < r.V; ++i) {
      const Best mine = ptr < list.n ? Best{list.x[ptr], list.v[ptr]} : Best{-INFINITY, -1};
      const Best win = block_best(mine, sh_best);
      if (mine.v >= 0 && mine.v == win.v) ++ptr;
      if (threadIdx.x == 0) {
        out.top_ids[b * out.top_width + i] = static_cast<int32_t>(win.v);
        out.top_logprobs[b * out.top_width + i] = static_cast<float>(win.x - lse);
      }
    }
  }

  if (threadIdx.x == 0) {
    out.status[b] = status;
    out.lse[b] = lse;
    if (out.nonfinite)
      out.nonfinite[b] = status;
    else if (status != kOk)
      atomicAdd(index_errors, 1);  // no flag to raise: the run reports an error
    if (status != kOk)
      out.ids[b] = -1;
    else if (row.path == ops::kPathGreedy)
      out.ids[b] = static_cast<int32_t>(top.v);
    else if (row.path == ops::kPathRace)
      out.ids[b] = static_cast<int32_t>(drawn.v);
    if (out.sampled_logprob) {  // rank_kernel fills sampled rows that want logprobs
      out.sampled_logprob[b] = 0.f;
      out.sampled_rank[b] = 0;
    }
  }
  if (out.top_ids) {  // the slots this row leaves empty
    const int filled = (want_lp && status == kOk) ? min(static_cast<int64_t>(k), r.V) : 0;
    for (int64_t i = filled + threadIdx.x; i < out.top_width; i += blockDim.x) {
      out.top_ids[b * out.top_width + i] = -1;
      out.top_logprobs[b * out.top_width + i] = 0.f;
    }
  }
}

// Sort input for the chunk's rows: processed logits and their token ids, and segment offsets.
__global__ void __launch_bounds__(kThreads)
    sort_keys_kernel(Inputs in, SortChunkParam chunk, int n, float* keys, int32_t* vals,
                     int32_t* offsets, int* index_errors) {
  extern __shared__ uint32_t bits[];
  const int slot = blockIdx.x;
  const int64_t b = chunk.row[slot];
  const RowView r = row_view(in, b, bits, index_errors);
  float* k = keys + slot * r.V;
  int32_t* id = vals + slot * r.V;
  for_each_token(in, r, chunk.rows[slot], [&](int64_t v, float z, float) {
    k[v] = z;
    id[v] = static_cast<int32_t>(v);
  });
  if (threadIdx.x == 0) {
    offsets[slot] = static_cast<int32_t>(slot * r.V);
    if (slot == n - 1) offsets[n] = static_cast<int32_t>(n * r.V);
  }
}

// Index of the first i in [0, n) whose running f64 sum of w through i reaches `need`; n if
// none. Threads own contiguous chunks; chunk sums are scanned in thread order.
template <class W>
__device__ int64_t first_reaching(int64_t n, W w, double need, double* sh, long long* found) {
  const int64_t per = (n + blockDim.x - 1) / blockDim.x;
  const int64_t lo = threadIdx.x * per, hi = min(n, lo + per);
  double s = 0.0;
  for (int64_t i = lo; i < hi; ++i)
    s += w(i);
  sh[threadIdx.x] = s;
  if (threadIdx.x == 0) *found = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0.0;
    for (int t = 0; t < kThreads; ++t) {
      const double v = sh[t];
      sh[t] = run;
      run += v;
    }
  }
  __syncthreads();
  double cum = sh[threadIdx.x];
  for (int64_t i = lo; i < hi; ++i) {
    cum += w(i);
    if (cum >= need) {
      atomicMin(found, static_cast<long long>(i));
      break;
    }
  }
  __syncthreads();
  const int64_t r = *found;
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads)
    sorted_draw_kernel(int64_t V, SortChunkParam chunk, const float* keys, const int32_t* vals,
                       const int32_t* status, int32_t* ids) {
  __shared__ Best sh_best[kWarps];
  __shared__ double sh_sum[kThreads];
  __shared__ long long found;
  const int slot = blockIdx.x;
  const int64_t b = chunk.row[slot];
  if (status[b] != kOk) return;
  const SampleRow row = chunk.rows[slot];
  const float* z = keys + slot * V;
  const int32_t* id = vals + slot * V;
  const float m = z[0], T = row.temperature;
  const int64_t kept_k = row.top_k > 0 ? min(static_cast<int64_t>(row.top_k), V) : V;
  // min_p keeps a prefix of the sorted order (scaled_logit is monotone in z).
  double passing = 0.0;
  for (int64_t i = threadIdx.x; i < kept_k; i += blockDim.x)
    passing += ops::scaled_logit(z[i], m, T) >= row.log_min_p ? 1.0 : 0.0;
  int64_t kept = static_cast<int64_t>(block_sum(passing, sh_sum));
  if (row.top_p < 1.f) {
    auto p = [&](int64_t i) { return exp(static_cast<double>(ops::scaled_logit(z[i], m, T))); };
    double mass = 0.0;
    for (int64_t i = threadIdx.x; i < kept; i += blockDim.x)
      mass += p(i);
    mass = block_sum(mass, sh_sum);
    const int64_t cut =
        first_reaching(kept, p, static_cast<double>(row.top_p) * mass, sh_sum, &found);
    if (cut < kept) kept = cut + 1;
  }
  Best drawn{-INFINITY, -1};
  for (int64_t i = threadIdx.x; i < kept; i += blockDim.x)
    race_offer(drawn, z[i], T, row.key, id[i]);
  drawn = block_best(drawn, sh_best);
  if (threadIdx.x == 0) ids[b] = static_cast<int32_t>(drawn.v);
}

// The sampled token's logprob and rank (#{v : z'_v >= z'_sampled}).
__global__ void __launch_bounds__(kThreads)
    rank_kernel(Inputs in, Outputs out, int64_t row0, SampleRowsParam rows, int* index_errors) {
  extern __shared__ uint32_t bits[];
  __shared__ double sh_sum[kThreads];
  __shared__ float sampled_z;
  const int64_t b = row0 + blockIdx.x;
  const SampleRow row = rows.rows[blockIdx.x];
  if (row.num_logprobs < 0 || out.status[b] != kOk) return;
  const RowView r = row_view(in, b, bits, index_errors);
  const int32_t s = out.ids[b];
  const float t_lp = row.path == ops::kPathGreedy ? 1.f : row.temperature;
  if (threadIdx.x == 0) {  // z of the sampled token: its entry (binary search) or its raw logit
    int64_t lo = r.e0, hi = r.e1;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (in.tokens[mid] < s)
        lo = mid + 1;
      else
        hi = mid;
    }
    const float raw = r.raw[s];
    sampled_z = lo < r.e1 && in.tokens[lo] == s
                    ? ops::processed_logit(raw, in.bias[lo], in.counts[lo], in.in_prompt[lo] != 0,
                                           row.presence, row.frequency, row.repetition)
                    : ops::plain_logit(raw);
  }
  __syncthreads();
  const float zs = ops::div_rn(sampled_z, t_lp);
  double count = 0.0;
  for_each_token(in, r, row,
                 [&](int64_t, float z, float) { count += ops::div_rn(z, t_lp) >= zs ? 1.0 : 0.0; });
  count = block_sum(count, sh_sum);
  if (threadIdx.x == 0) {
    out.sampled_logprob[b] = static_cast<float>(static_cast<double>(zs) - out.lse[b]);
    out.sampled_rank[b] = static_cast<int32_t>(count);
  }
}

size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

int64_t sort_chunk_rows(int64_t vocab, int64_t num_sorted) {
  const int64_t by_size = std::max<int64_t>(1, kSortElements / vocab);
  return std::min<int64_t>({num_sorted, by_size, kSortRowsPerChunk});
}

size_t cub_temp_bytes(int64_t rows, int64_t vocab) {
  size_t bytes = 0;
  STRATA_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(rows * vocab), static_cast<int>(rows), static_cast<const int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr)));
  return bytes;
}

// Scratch layout: status [B] i32, lse [B] f64, then (sorted rows only) keys, sorted keys, ids,
// sorted ids [chunk * V], offsets [chunk + 1], CUB's temporary storage.
struct Scratch {
  int32_t* status;
  double* lse;
  float* keys_in;
  float* keys_out;
  int32_t* vals_in;
  int32_t* vals_out;
  int32_t* offsets;
  void* temp;
  size_t temp_bytes;
};

Scratch carve(void* base, int64_t rows, int64_t vocab, int64_t chunk) {
  Scratch s{};
  char* p = static_cast<char*>(base);
  s.status = reinterpret_cast<int32_t*>(p);
  p += align256(static_cast<size_t>(rows) * 4);
  s.lse = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(rows) * 8);
  if (chunk == 0) return s;
  const size_t n = static_cast<size_t>(chunk * vocab);
  s.keys_in = reinterpret_cast<float*>(p);
  p += align256(n * 4);
  s.keys_out = reinterpret_cast<float*>(p);
  p += align256(n * 4);
  s.vals_in = reinterpret_cast<int32_t*>(p);
  p += align256(n * 4);
  s.vals_out = reinterpret_cast<int32_t*>(p);
  p += align256(n * 4);
  s.offsets = reinterpret_cast<int32_t*>(p);
  p += align256(static_cast<size_t>(chunk + 1) * 4);
  s.temp = p;
  s.temp_bytes = cub_temp_bytes(chunk, vocab);
  return s;
}

}  // namespace

size_t sample_scratch_bytes(int64_t rows, int64_t vocab, int64_t num_sorted) {
  size_t bytes = align256(static_cast<size_t>(rows) * 4) + align256(static_cast<size_t>(rows) * 8);
  if (num_sorted == 0) return bytes;
  const int64_t chunk = sort_chunk_rows(vocab, num_sorted);
  const size_t n = static_cast<size_t>(chunk * vocab);
  return bytes + 4 * align256(n * 4) + align256(static_cast<size_t>(chunk + 1) * 4) +
         align256(cub_temp_bytes(chunk, vocab));
}

void launch_sample(const SampleLaunch& p, int* index_errors, void* stream) {
  const int64_t B = p.logits.rows, V = p.logits.cols;
  if (B == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t chunk = p.num_sorted > 0 ? sort_chunk_rows(V, p.num_sorted) : 0;
  const Scratch sc = carve(p.scratch, B, V, chunk);
  const Inputs in{p.logits,       p.entry_offsets,   p.entry_tokens,
                  p.entry_counts, p.entry_in_prompt, p.entry_bias};
  const Outputs out{p.ids,          p.nonfinite, p.sampled_logprob, p.sampled_rank, p.top_ids,
                    p.top_logprobs, p.top_width, sc.status,         sc.lse};
  // The bitmap of listed tokens: (V + 31) / 32 words of dynamic shared memory (32 KiB at
  // V = 262144), only when some row has entries.
  const size_t bitmap_bytes = p.entry_offsets ? static_cast<size_t>((V + 31) / 32) * 4 : 0;
  if (bitmap_bytes > 48 * 1024) {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bitmap_bytes)));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(sort_keys_kernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bitmap_bytes)));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(rank_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bitmap_bytes)));
  }
  auto row_chunks = [&](auto launch) {
    for (int64_t r0 = 0; r0 < B; r0 += kSampleRowsPerLaunch) {
      const int64_t n = std::min<int64_t>(kSampleRowsPerLaunch, B - r0);
      SampleRowsParam param{};
      for (int64_t i = 0; i < n; ++i)
        param.rows[i] = p.rows[r0 + i];
      launch(r0, n, param);
    }
  };
  row_chunks([&](int64_t r0, int64_t n, const SampleRowsParam& param) {
    scan_kernel<<<static_cast<unsigned>(n), kThreads, bitmap_bytes, s>>>(in, out, r0, param,
                                                                         index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
  });
  for (int64_t c0 = 0; c0 < p.num_sorted; c0 += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, p.num_sorted - c0));
    SortChunkParam param{};
    for (int i = 0; i < n; ++i) {
      param.row[i] = p.sorted_rows[c0 + i];
      param.rows[i] = p.rows[param.row[i]];
    }
    sort_keys_kernel<<<static_cast<unsigned>(n), kThreads, bitmap_bytes, s>>>(
        in, param, n, sc.keys_in, sc.vals_in, sc.offsets, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
    size_t temp = sc.temp_bytes;
    // Stable radix sort: equal logits keep ascending ids, the host's tie order (processed
    // logits are never -0, whose bits would sort below +0).
    STRATA_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        sc.temp, temp, sc.keys_in, sc.keys_out, sc.vals_in, sc.vals_out, static_cast<int>(n * V), n,
        sc.offsets, sc.offsets + 1, 0, 32, s));
    STRATA_CUDA_LAUNCH_CHECK();
    sorted_draw_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(V, param, sc.keys_out,
                                                                     sc.vals_out, sc.status, p.ids);
    STRATA_CUDA_LAUNCH_CHECK();
  }
  if (p.any_logprobs) {
    row_chunks([&](int64_t r0, int64_t n, const SampleRowsParam& param) {
      rank_kernel<<<static_cast<unsigned>(n), kThreads, bitmap_bytes, s>>>(in, out, r0, param,
                                                                           index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    });
  }
}

}  // namespace strata::cuda
