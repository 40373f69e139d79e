// Causal depthwise conv1d + SiLU. Channels are contiguous in x, the state and the output, so a
// warp reads one coalesced row segment per window tap. Prefill: bf16 with width 4 (every
// Nemotron-H) runs two channels per thread over runs of 16 tokens with the window in registers;
// other dtypes and widths one thread per (token, channel).
// out = act(silu(bias + sum_k w[c, k] * window[k])) in f32, window oldest first.
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

constexpr int kThreads = 128;

// Sequence of packed token t: the b with cu[b] <= t < cu[b+1] (binary search over B+1 offsets).
__device__ __forceinline__ int find_sequence(const int32_t* cu, int nseq, int64_t t) {
  int lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <class T>
__global__ void conv1d_prefill_kernel(const T* x, int64_t ldx, const T* w, const T* bias,
                                      const T* states, int64_t num_slots, int K, const int32_t* cu,
                                      const int32_t* slots, const int32_t* has_init, int nseq,
                                      T* out, int64_t ldo, int64_t C, int* errors) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t t = blockIdx.x;
  if (c >= C) return;
  const int b = find_sequence(cu, nseq, t);
  const int64_t start = cu[b], local = t - start;
  const int32_t slot = slots[b];
  bool from_state = has_init[b] != 0;
  if (from_state && (slot < 0 || slot >= num_slots)) {
    if (c == 0 && local == 0) atomicAdd(errors, 1);
    from_state = false;
  }
  float acc = to_f32(bias[c]);
  for (int k = 0; k < K; ++k) {
    const int64_t pos =
        local - (K - 1) + k;  // position in the sequence; < 0 reaches into the state
    float v = 0.f;
    if (pos >= 0)
      v = to_f32(x[(start + pos) * ldx + c]);
    else if (from_state)
      v = to_f32(states[(static_cast<int64_t>(slot) * (K - 1) + (K - 1) + pos) * C + c]);
    acc += to_f32(w[c * K + k]) * v;
  }
  out[t * ldo + c] = from_f32<T>(siluf_(acc));
}

// Prefill, bf16, width KC, two channels per thread (bf16x2) over a run of kRun consecutive
// tokens: each x row is read once and the window slides in registers (the one-thread-per-token
// kernel above reads every x value K times with 2-byte loads). A run may cross sequence
// boundaries: the window restarts from the next sequence's state (or zeros) there.
constexpr int kRun = 16;

template <int KC, bool kPreload>
__global__ void __launch_bounds__(kThreads)
    conv1d_prefill_runs_kernel(const bf16* __restrict__ x, int64_t ldx, const bf16* __restrict__ w,
                               const bf16* __restrict__ bias, const bf16* __restrict__ states,
                               int64_t num_slots, const int32_t* cu, const int32_t* slots,
                               const int32_t* has_init, int nseq, int64_t tokens,
                               bf16* __restrict__ out, int64_t ldo, int64_t C, int* errors) {
  const int64_t c = 2 * (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x);
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kRun;
  if (c >= C || t0 >= tokens) return;
  const int n = static_cast<int>(min(tokens - t0, static_cast<int64_t>(kRun)));
  auto pair_at = [](const bf16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  };
  // The run's x pairs first, every load in flight at once: a load-compute-store chain per
  // token made the kernel wait one memory latency per token.
  float2 xs[kRun];
#pragma unroll
  for (int i = 0; i < kRun; ++i)
    if (kPreload && i < n) xs[i] = pair_at(x + (t0 + i) * ldx + c);
  float w0[KC], w1[KC];
#pragma unroll
  for (int k = 0; k < KC; ++k) {
    w0[k] = to_f32(w[c * KC + k]);
    w1[k] = to_f32(w[(c + 1) * KC + k]);
  }
  const float b0 = to_f32(bias[c]), b1 = to_f32(bias[c + 1]);

  int b = find_sequence(cu, nseq, t0);
  int64_t end = 0;
  float win0[KC - 1], win1[KC - 1];  // the K-1 values before the current token, oldest first
  // Window of sequence b for its local position `local`: earlier tokens of the sequence, then
  // the state's rows (has_initial), else zeros.
  auto enter = [&](int64_t local) {
    const int64_t start = cu[b];
    end = cu[b + 1];
    const int32_t slot = slots[b];
    bool from_state = has_init[b] != 0;
    if (from_state && (slot < 0 || slot >= num_slots)) {
      if (c == 0 && local == 0) atomicAdd(errors, 1);
      from_state = false;
    }
#pragma unroll
    for (int j = 0; j < KC - 1; ++j) {
      const int64_t pos = local - (KC - 1) + j;
      float2 v = make_float2(0.f, 0.f);
      if (pos >= 0)
        v = pair_at(x + (start + pos) * ldx + c);
      else if (from_state)
        v = pair_at(states + (static_cast<int64_t>(slot) * (KC - 1) + (KC - 1) + pos) * C + c);
      win0[j] = v.x;
      win1[j] = v.y;
    }
  };
  enter(t0 - cu[b]);
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    if (i >= n) break;
    const int64_t t = t0 + i;
    while (t >= end && b + 1 < nseq) {  // the next (non-empty) sequence starts here
      ++b;
      enter(t - cu[b]);
    }
    const float2 xv = kPreload ? xs[i] : pair_at(x + t * ldx + c);
    float a0 = b0, a1 = b1;
#pragma unroll
    for (int k = 0; k < KC - 1; ++k) {
      a0 += w0[k] * win0[k];
      a1 += w1[k] * win1[k];
    }
    a0 += w0[KC - 1] * xv.x;
    a1 += w1[KC - 1] * xv.y;
    *reinterpret_cast<__nv_bfloat162*>(out + t * ldo + c) =
        __floats2bfloat162_rn(siluf_(a0), siluf_(a1));
#pragma unroll
    for (int k = 0; k + 1 < KC - 1; ++k) {
      win0[k] = win0[k + 1];
      win1[k] = win1[k + 1];
    }
    win0[KC - 2] = xv.x;
    win1[KC - 2] = xv.y;
  }
}

// After the prefill kernel (stream order): the last K-1 raw window rows become the new state.
template <class T>
__global__ void conv1d_writeback_kernel(const T* x, int64_t ldx, int64_t tokens, T* states,
                                        int64_t num_slots, int K, const int32_t* cu,
                                        const int32_t* slots, const int32_t* has_init, int64_t C,
                                        int* errors) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int b = blockIdx.x;
  if (c >= C) return;
  const int32_t slot = slots[b];
  if (slot < 0 || slot >= num_slots) {
    if (c == 0) atomicAdd(errors, 1);
    return;
  }
  const int64_t start = cu[b], len = cu[b + 1] - cu[b];
  if (start < 0 || len < 0 || start + len > tokens) {  // offsets outside the packed tokens
    if (c == 0) atomicAdd(errors, 1);
    return;
  }
  T* st = states + static_cast<int64_t>(slot) * (K - 1) * C + c;
  float keep[kMaxConvWidth];
  for (int j = 0; j < K - 1; ++j) {
    const int64_t wi = len + j;  // index in window = state (K-1 rows) ++ x (len rows)
    float v = 0.f;
    if (wi >= K - 1)
      v = to_f32(x[(start + wi - (K - 1)) * ldx + c]);
    else if (has_init[b])
      v = to_f32(st[wi * C]);
    keep[j] = v;  // read everything before writing: the rows overlap
  }
  for (int j = 0; j < K - 1; ++j)
    st[j * C] = from_f32<T>(keep[j]);
}

// KC > 0: the width known at compile time (4 in every Nemotron-H), so the window stays in
// registers.
template <class T, int KC>
__global__ void conv1d_update_kernel(const T* x, int64_t ldx, const T* w, const T* bias, T* states,
                                     int64_t num_slots, int K_rt, const int32_t* slots, T* out,
                                     int64_t ldo, int64_t C, int* errors) {
  pdl_enter();
  const int K = KC > 0 ? KC : K_rt;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t b = blockIdx.x;
  if (c >= C) return;
  const int32_t slot = slots[b];
  if (slot < 0 || slot >= num_slots) {
    if (c == 0) atomicAdd(errors, 1);
    return;
  }
  T* st = states + static_cast<int64_t>(slot) * (K - 1) * C + c;
  float win[KC > 0 ? KC : kMaxConvWidth];
#pragma unroll
  for (int j = 0; j < K - 1; ++j)
    win[j] = to_f32(st[j * C]);
  const T xin = x[b * ldx + c];
  win[K - 1] = to_f32(xin);
  float acc = to_f32(bias[c]);
#pragma unroll
  for (int k = 0; k < K; ++k)
    acc += to_f32(w[c * K + k]) * win[k];
  out[b * ldo + c] = from_f32<T>(siluf_(acc));
#pragma unroll
  for (int j = 0; j + 1 < K - 1; ++j)
    st[j * C] = from_f32<T>(win[j + 1]);
  st[(K - 2) * C] = xin;
}

bool aligned4(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 4 == 0;
}

}  // namespace

void launch_conv1d_prefill(const Conv1dLaunch& p, int* index_errors, void* stream) {
  const int64_t T = p.x.rows, C = p.x.cols;
  const int nseq = static_cast<int>(p.slots.n);
  auto s = static_cast<cudaStream_t>(stream);
  const int K = static_cast<int>(p.width);
  const auto* cu = static_cast<const int32_t*>(p.cu_seqlens.p);
  const auto* slots = static_cast<const int32_t*>(p.slots.p);
  const auto* hi = static_cast<const int32_t*>(p.has_initial.p);
  with_act(p.x.dt, [&](auto tag) {
    using Tt = decltype(tag);
    const bool runs = std::is_same_v<Tt, bf16> && K == 4 && C % 2 == 0 && p.x.ld % 2 == 0 &&
                      p.out.ld % 2 == 0 && aligned4(p.x.p) && aligned4(p.out.p) &&
                      aligned4(p.states) && aligned4(p.weight) && aligned4(p.bias);
    if (T > 0 && runs) {
      dim3 grid(static_cast<unsigned>((T + kRun - 1) / kRun), grid_1d(C / 2, kThreads));
      auto kernel =
          p.preload ? conv1d_prefill_runs_kernel<4, true> : conv1d_prefill_runs_kernel<4, false>;
      kernel<<<grid, kThreads, 0, s>>>(
          static_cast<const bf16*>(p.x.p), p.x.ld, static_cast<const bf16*>(p.weight),
          static_cast<const bf16*>(p.bias), static_cast<const bf16*>(p.states), p.num_slots, cu,
          slots, hi, nseq, T, static_cast<bf16*>(p.out.p), p.out.ld, C, index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    } else if (T > 0) {
      dim3 grid(static_cast<unsigned>(T), grid_1d(C, kThreads));
      conv1d_prefill_kernel<Tt><<<grid, kThreads, 0, s>>>(
          static_cast<const Tt*>(p.x.p), p.x.ld, static_cast<const Tt*>(p.weight),
          static_cast<const Tt*>(p.bias), static_cast<const Tt*>(p.states), p.num_slots, K, cu,
          slots, hi, nseq, static_cast<Tt*>(p.out.p), p.out.ld, C, index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    }
    if (nseq > 0) {
      dim3 grid(static_cast<unsigned>(nseq), grid_1d(C, kThreads));
      conv1d_writeback_kernel<Tt><<<grid, kThreads, 0, s>>>(
          static_cast<const Tt*>(p.x.p), p.x.ld, T, static_cast<Tt*>(p.states), p.num_slots, K, cu,
          slots, hi, C, index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    }
  });
}

void launch_conv1d_update(const Conv1dLaunch& p, int* index_errors, void* stream) {
  const int64_t B = p.x.rows, C = p.x.cols;
  if (B == 0) return;
  with_act(p.x.dt, [&](auto tag) {
    using Tt = decltype(tag);
    dim3 grid(static_cast<unsigned>(B), grid_1d(C, kThreads));
    auto kernel = p.width == 4 ? conv1d_update_kernel<Tt, 4> : conv1d_update_kernel<Tt, 0>;
    launch_pdl(kernel, grid, dim3(kThreads), 0, static_cast<cudaStream_t>(stream),
               static_cast<const Tt*>(p.x.p), p.x.ld, static_cast<const Tt*>(p.weight),
               static_cast<const Tt*>(p.bias), static_cast<Tt*>(p.states), p.num_slots,
               static_cast<int>(p.width), static_cast<const int32_t*>(p.slots.p),
               static_cast<Tt*>(p.out.p), p.out.ld, C, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace strata::cuda
