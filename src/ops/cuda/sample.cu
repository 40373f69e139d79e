// The device sampler. Greedy rows: a block argmax (lowest index on ties). Rows with a
// temperature follow the host sampler exactly (src/ops/host/sample.cpp): the vocabulary ordered
// by logit, descending, ties by lower index (a stable segmented radix sort of (logit, id)
// pairs); keep top_k; p_i = expf((l_i - l_max) / temperature); top_p keeps the shortest prefix
// whose mass (f64) reaches top_p * mass; the uniform u of (seed, step) from
// ops/sampling_rng.h picks the first kept token whose cumulative mass exceeds u * kept mass.
// Prefix sums are f64 over thread-contiguous chunks, so only a draw within ~1e-16 of a
// boundary can differ from the host's sequential sum.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <cfloat>
#include <climits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/sample.h"
#include "ops/sampling_rng.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void better(float& v, int& i, float w, int j) {
  if (w > v || (w == v && j < i)) {
    v = w;
    i = j;
  }
}

// grid (rows): argmax of every row; greedy rows write their id here.
__global__ void argmax_kernel(Mat logits, int64_t row0, SampleRowsParam rows, int32_t* ids,
                              int* errors) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const int64_t r = blockIdx.x, b = row0 + r;
  const float* l = static_cast<const float*>(logits.p) + b * logits.ld;
  float v = -INFINITY;
  int i = INT_MAX;
  for (int64_t c = threadIdx.x; c < logits.cols; c += blockDim.x)
    better(v, i, l[c], static_cast<int>(c));
  for (int o = 16; o > 0; o >>= 1)
    better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    v = lane < nw ? sv[lane] : -INFINITY;
    i = lane < nw ? si[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1)
      better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    if (lane == 0) {
      if (!(v > -INFINITY) ||
          i == INT_MAX) {  // NaN or no finite maximum: the host refuses such rows
        atomicAdd(errors, 1);
        i = 0;
      }
      if (rows.rows[r].temperature == 0.f) ids[b] = i;
    }
  }
}

// Contiguous keys (logits) and values (token ids) for the sort, and the segment offsets.
__global__ void sort_input_kernel(Mat logits, float* keys, int32_t* vals, int32_t* offsets) {
  const int64_t b = blockIdx.y, V = logits.cols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < V) {
    keys[b * V + c] = static_cast<const float*>(logits.p)[b * logits.ld + c];
    vals[b * V + c] = static_cast<int32_t>(c);
  }
  if (c == 0) {
    offsets[b] = static_cast<int32_t>(b * V);
    if (b == static_cast<int64_t>(gridDim.y) - 1)
      offsets[b + 1] = static_cast<int32_t>((b + 1) * V);
  }
}

// Sum over [0, n) of w(i) in f64: threads own contiguous chunks, chunk sums are added in thread
// order. `sh` holds kThreads doubles; every thread gets the total.
template <class W>
__device__ double chunked_sum(int64_t n, W w, double* sh) {
  const int64_t per = (n + blockDim.x - 1) / blockDim.x;
  const int64_t lo = threadIdx.x * per, hi = min(n, lo + per);
  double s = 0.0;
  for (int64_t i = lo; i < hi; ++i)
    s += w(i);
  sh[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0.0;
    for (unsigned t = 0; t < blockDim.x; ++t)
      run += sh[t];
    sh[0] = run;
  }
  __syncthreads();
  const double total = sh[0];
  __syncthreads();
  return total;
}

// Index of the first i in [0, n) with pred(i, cum_i), cum_i the running f64 sum of w through
// i (chunked as above); n if none. Every thread gets the answer.
template <class W, class Pred>
__device__ int64_t first_crossing(int64_t n, W w, Pred pred, double* sh, long long* found) {
  const int64_t per = (n + blockDim.x - 1) / blockDim.x;
  const int64_t lo = threadIdx.x * per, hi = min(n, lo + per);
  double s = 0.0;
  for (int64_t i = lo; i < hi; ++i)
    s += w(i);
  sh[threadIdx.x] = s;
  if (threadIdx.x == 0) *found = n;
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive scan of the chunk sums, in thread order
    double run = 0.0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const double v = sh[t];
      sh[t] = run;
      run += v;
    }
  }
  __syncthreads();
  double cum = sh[threadIdx.x];
  for (int64_t i = lo; i < hi; ++i) {
    cum += w(i);
    if (pred(i, cum)) {
      atomicMin(found, static_cast<long long>(i));
      break;
    }
  }
  __syncthreads();
  const int64_t r = *found;
  __syncthreads();
  return r;
}

// grid (rows): rows with a temperature draw from their sorted logits.
__global__ void __launch_bounds__(kThreads)
    draw_kernel(int64_t V, int64_t row0, SampleRowsParam rows, const float* keys,
                const int32_t* vals, int32_t* ids) {
  __shared__ double sh[kThreads];
  __shared__ long long found;
  const int64_t r = blockIdx.x, b = row0 + r;
  const SampleRow row = rows.rows[r];
  if (row.temperature == 0.f) return;  // greedy: written by argmax_kernel
  const float* k = keys + b * V;
  const int32_t* id = vals + b * V;
  const float m = k[0], temp = row.temperature;
  auto p = [&](int64_t i) { return static_cast<double>(expf((k[i] - m) / temp)); };
  int64_t kept = row.top_k > 0 ? min(static_cast<int64_t>(row.top_k), V) : V;
  double mass = chunked_sum(kept, p, sh);
  if (row.top_p < 1.f) {
    const double need = static_cast<double>(row.top_p) * mass;
    const int64_t cut = first_crossing(
        kept, p, [&](int64_t, double cum) { return cum >= need; }, sh, &found);
    if (cut < kept) {
      kept = cut + 1;
      mass = chunked_sum(kept, p, sh);
    }
  }
  const double target = static_cast<double>(ops::philox_or_splitmix(row.seed, row.step)) * mass;
  const int64_t pick = first_crossing(
      kept, p, [&](int64_t i, double cum) { return target < cum && p(i) > 0.0; }, sh, &found);
  if (threadIdx.x == 0) {
    int64_t chosen = pick;
    if (chosen >= kept) {  // rounding at the very end: the last positive kept token, as the host
      chosen = 0;
      for (int64_t i = kept - 1; i >= 0; --i)
        if (p(i) > 0.0) {
          chosen = i;
          break;
        }
    }
    ids[b] = id[chosen];
  }
}

struct SortScratch {
  float* keys_in;
  float* keys_out;
  int32_t* vals_in;
  int32_t* vals_out;
  int32_t* offsets;
  void* temp;
  size_t temp_bytes;
};

size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
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

SortScratch carve(void* base, int64_t rows, int64_t vocab, size_t temp_bytes) {
  SortScratch s;
  char* p = static_cast<char*>(base);
  const size_t n = static_cast<size_t>(rows * vocab);
  s.keys_in = reinterpret_cast<float*>(p);
  p += align256(n * 4);
  s.keys_out = reinterpret_cast<float*>(p);
  p += align256(n * 4);
  s.vals_in = reinterpret_cast<int32_t*>(p);
  p += align256(n * 4);
  s.vals_out = reinterpret_cast<int32_t*>(p);
  p += align256(n * 4);
  s.offsets = reinterpret_cast<int32_t*>(p);
  p += align256(static_cast<size_t>(rows + 1) * 4);
  s.temp = p;
  s.temp_bytes = temp_bytes;
  return s;
}

}  // namespace

size_t sample_scratch_bytes(int64_t rows, int64_t vocab) {
  const size_t n = static_cast<size_t>(rows * vocab);
  return 4 * align256(n * 4) + align256(static_cast<size_t>(rows + 1) * 4) +
         align256(cub_temp_bytes(rows, vocab));
}

void launch_sample(const SampleLaunch& p, const SampleRow* rows, int* index_errors, void* stream) {
  const int64_t B = p.logits.rows, V = p.logits.cols;
  if (B == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  SortScratch sc{};
  if (p.any_random) {
    sc = carve(p.scratch, B, V, cub_temp_bytes(B, V));
    sort_input_kernel<<<dim3(grid_1d(V, 256), static_cast<unsigned>(B)), 256, 0, s>>>(
        p.logits, sc.keys_in, sc.vals_in, sc.offsets);
    STRATA_CUDA_LAUNCH_CHECK();
    size_t temp = sc.temp_bytes;
    // Stable radix sort: equal logits keep ascending ids, the host's tie order.
    STRATA_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        sc.temp, temp, sc.keys_in, sc.keys_out, sc.vals_in, sc.vals_out, static_cast<int>(B * V),
        static_cast<int>(B), sc.offsets, sc.offsets + 1, 0, 32, s));
    STRATA_CUDA_LAUNCH_CHECK();
  }
  for (int64_t r0 = 0; r0 < B; r0 += kSampleRowsPerLaunch) {
    const int64_t n = std::min<int64_t>(kSampleRowsPerLaunch, B - r0);
    SampleRowsParam param{};
    for (int64_t i = 0; i < n; ++i)
      param.rows[i] = rows[r0 + i];
    argmax_kernel<<<static_cast<unsigned>(n), 1024, 0, s>>>(p.logits, r0, param, p.ids,
                                                            index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
    if (p.any_random) {
      draw_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(V, r0, param, sc.keys_out,
                                                                sc.vals_out, p.ids);
      STRATA_CUDA_LAUNCH_CHECK();
    }
  }
}

}  // namespace strata::cuda
