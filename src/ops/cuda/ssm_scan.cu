// Mamba2 chunked scan (SSD) over packed sequences, f32 math on CUDA cores (any act dtype; the
// f32 models' path: bf16 models take ssm_scan_mma.cu where its shapes allow). For chunk c of a
// sequence (Q tokens, never straddling sequences), local positions l, a_l = dt_l * A, cum_l =
// sum_{j<=l} a_j:
//   Y_diag[l] = sum_{s<=l} (C_l . B_s) exp(cum_l - cum_s) dt_s x_s
//   S_loc     = sum_s exp(cum_last - cum_s) dt_s x_s (x) B_s
//   S_in(c+1) = exp(cum_last(c)) S_in(c) + S_loc(c),  S_in(first) = initial state or 0
//   y_l       = act(Y_diag[l] + exp(cum_l) S_in(c) C_l + D x_l)
// Kernels, in stream order: chunk table -> dt/cumsum -> C.B per group -> chunk states -> state
// passing (writes the final state) -> outputs. The first two and the state passing are shared
// with the tensor-core path (ssm_scan_common.cuh).
#include "ops/cuda/ssm_scan_common.cuh"

namespace strata::cuda {

namespace {

constexpr int kPTile = 16;  // head_dim rows per block in the state and output kernels

struct Scratch : scan::Chunks {
  float* cb;      // [nc, G, Q(s), Q(l)]
  float* states;  // [nc, Hm, P, N]
};

Scratch scratch_of(const SsmLaunch& p) {
  Scratch s;
  static_cast<scan::Chunks&>(s) = scan::chunks_of(p);
  s.cb = p.scratch_f32 + scan::chunks_f32(p);
  s.states = s.cb + s.max_chunks * p.groups * p.chunk_size * p.chunk_size;
  return s;
}

// grid (nc, G, tiles of 32x32 over (s, l)), block 256: cb[s][l] = C_l . B_s for s <= l.
template <class T>
__global__ void chunk_cb_kernel(SsmLaunch p, Scratch s) {
  __shared__ float cs[32][33], bs[32][33];
  const int64_t c = blockIdx.x, g = blockIdx.y, Q = p.chunk_size, N = p.state_size;
  const int32_t len = s.table[3 * c + 2];
  if (len == 0) return;
  const int tiles = static_cast<int>((Q + 31) / 32);
  const int ts = blockIdx.z / tiles, tl = blockIdx.z % tiles;
  if (ts > tl) return;  // strictly above the diagonal: never used
  const int64_t t0 = s.table[3 * c + 1];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;  // 8 rows of 32
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const T* Cm = static_cast<const T*>(p.C.p);
  const T* Bm = static_cast<const T*>(p.B.p);
  for (int64_t n0 = 0; n0 < N; n0 += 32) {
    for (int r = ty; r < 32; r += 8) {
      const int64_t l = tl * 32 + r, sI = ts * 32 + r, n = n0 + tx;
      cs[r][tx] = (l < len && n < N) ? to_f32(Cm[(t0 + l) * p.C.ld + g * N + n]) : 0.f;
      bs[r][tx] = (sI < len && n < N) ? to_f32(Bm[(t0 + sI) * p.B.ld + g * N + n]) : 0.f;
    }
    __syncthreads();
    // thread: l = tl*32 + tx, s rows ty, ty+8, ty+16, ty+24
#pragma unroll 8
    for (int k = 0; k < 32; ++k) {
      const float cv = cs[tx][k];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[i] += cv * bs[ty + 8 * i][k];
    }
    __syncthreads();
  }
  float* out = s.cb + (c * p.groups + g) * Q * Q;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t sI = ts * 32 + ty + 8 * i, l = tl * 32 + tx;
    if (sI < Q && l < Q) out[sI * Q + l] = acc[i];
  }
}

// grid (nc, Hm, ceil(P / kPTile)), block 256: the chunk's own state contribution
// S_loc[p, n] = sum_s exp(cum_last - cum_s) dt_s x_s[p] B_s[n] over a tile of rows p.
template <class T>
__global__ void chunk_state_kernel(SsmLaunch p, Scratch s) {
  extern __shared__ float sh[];
  const int64_t c = blockIdx.x, h = blockIdx.y, Q = p.chunk_size, N = p.state_size, P = p.head_dim;
  const int64_t Hm = p.heads, g = h / (Hm / p.groups),
                p0 = static_cast<int64_t>(blockIdx.z) * kPTile;
  const int32_t len = s.table[3 * c + 2];
  if (len == 0) return;
  const int64_t t0 = s.table[3 * c + 1];
  float* bsh = sh;          // [32][N]
  float* xw = sh + 32 * N;  // [32][kPTile]
  const float* cum = s.cum + (c * Hm + h) * Q;
  const float* dtv = s.dt + (c * Hm + h) * Q;
  const float cum_last = cum[len - 1];
  const int64_t elems = kPTile * N;  // <= 4096: at most 16 per thread
  float acc[16];
  int prow[16], ncol[16];  // this thread's elements: tile row and state column (-1: none)
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    acc[i] = 0.f;
    const int64_t e = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    prow[i] = e < elems ? static_cast<int>(e / N) : -1;
    ncol[i] = e < elems ? static_cast<int>(e % N) : 0;
  }
  const T* Bm = static_cast<const T*>(p.B.p);
  const T* Xm = static_cast<const T*>(p.x.p);
  for (int64_t s0 = 0; s0 < len; s0 += 32) {
    for (int64_t e = threadIdx.x; e < 32 * N; e += blockDim.x) {
      const int64_t r = e / N, n = e % N, si = s0 + r;
      bsh[e] = si < len ? to_f32(Bm[(t0 + si) * p.B.ld + g * N + n]) : 0.f;
    }
    for (int64_t e = threadIdx.x; e < 32 * kPTile; e += blockDim.x) {
      const int64_t r = e / kPTile, pp = e % kPTile, si = s0 + r;
      float v = 0.f;
      if (si < len && p0 + pp < P)
        v = expf(cum_last - cum[si]) * dtv[si] * to_f32(Xm[(t0 + si) * p.x.ld + h * P + p0 + pp]);
      xw[e] = v;
    }
    __syncthreads();
    const int rows =
        static_cast<int>(min(static_cast<int64_t>(32), static_cast<int64_t>(len) - s0));
    for (int r = 0; r < rows; ++r) {
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (prow[i] >= 0) acc[i] += xw[r * kPTile + prow[i]] * bsh[r * N + ncol[i]];
    }
    __syncthreads();
  }
  float* out = s.states + ((c * Hm + h) * P) * N;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    if (prow[i] >= 0 && p0 + prow[i] < P) out[(p0 + prow[i]) * N + ncol[i]] = acc[i];
}

// grid (nc, Hm, ceil(P / kPTile)), block Q threads (thread = position l): kPTile outputs each.
template <class T>
__global__ void chunk_scan_kernel(SsmLaunch p, Scratch s) {
  extern __shared__ float sh[];
  const int64_t c = blockIdx.x, h = blockIdx.y, Q = p.chunk_size, N = p.state_size, P = p.head_dim;
  const int64_t Hm = p.heads, g = h / (Hm / p.groups),
                p0 = static_cast<int64_t>(blockIdx.z) * kPTile;
  const int32_t len = s.table[3 * c + 2];
  if (len == 0) return;
  const int64_t t0 = s.table[3 * c + 1];
  const int l = threadIdx.x;
  float* xd = sh;                // [Q][kPTile]: dt_s * x_s[p]
  float* cum = xd + Q * kPTile;  // [Q]
  float* sin = cum + Q;          // [kPTile][N]: state entering the chunk
  float* cs = sin + kPTile * N;  // [Q][33]: a 32-wide slice of C rows
  const float* cumg = s.cum + (c * Hm + h) * Q;
  const float* dtg = s.dt + (c * Hm + h) * Q;
  const T* Xm = static_cast<const T*>(p.x.p);
  const T* Cm = static_cast<const T*>(p.C.p);
  for (int64_t e = threadIdx.x; e < Q * kPTile; e += blockDim.x) {
    const int64_t si = e / kPTile, pp = e % kPTile;
    xd[e] = (si < len && p0 + pp < P) ? dtg[si] * to_f32(Xm[(t0 + si) * p.x.ld + h * P + p0 + pp])
                                      : 0.f;
  }
  cum[l] = cumg[l];
  const float* sg = s.states + ((c * Hm + h) * P) * N;
  for (int64_t e = threadIdx.x; e < kPTile * N; e += blockDim.x)
    sin[e] = p0 + e / N < P ? sg[(p0 + e / N) * N + e % N] : 0.f;
  __syncthreads();

  float acc[kPTile];
#pragma unroll
  for (int i = 0; i < kPTile; ++i)
    acc[i] = 0.f;
  // Y_off: S_in . C_l, 32 state columns at a time through shared memory.
  for (int64_t n0 = 0; n0 < N; n0 += 32) {
    for (int64_t e = threadIdx.x; e < Q * 32; e += blockDim.x) {
      const int64_t r = e / 32, k = e % 32;
      cs[r * 33 + k] =
          (r < len && n0 + k < N) ? to_f32(Cm[(t0 + r) * p.C.ld + g * N + n0 + k]) : 0.f;
    }
    __syncthreads();
    const int kmax = static_cast<int>(min(static_cast<int64_t>(32), N - n0));
    for (int k = 0; k < kmax; ++k) {
      const float cv = cs[l * 33 + k];
#pragma unroll
      for (int i = 0; i < kPTile; ++i)
        acc[i] += sin[i * N + n0 + k] * cv;
    }
    __syncthreads();
  }
  if (l >= len) return;
  const float cl = cum[l];
  const float decay_in = expf(cl);
#pragma unroll
  for (int i = 0; i < kPTile; ++i)
    acc[i] *= decay_in;
  // Y_diag: causal sum over earlier positions of the chunk.
  const float* cb = s.cb + (c * p.groups + g) * Q * Q;
  for (int si = 0; si <= l; ++si) {
    const float w = cb[si * Q + l] * expf(cl - cum[si]);
#pragma unroll
    for (int i = 0; i < kPTile; ++i)
      acc[i] += w * xd[si * kPTile + i];
  }
  const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h);
  T* ym = static_cast<T*>(p.out.p);
#pragma unroll
  for (int i = 0; i < kPTile; ++i) {
    if (p0 + i >= P) break;
    const float xv = to_f32(Xm[(t0 + l) * p.x.ld + h * P + p0 + i]);
    ym[(t0 + l) * p.out.ld + h * P + p0 + i] = from_f32<T>(acc[i] + Dh * xv);
  }
}

}  // namespace

int64_t ssm_scan_max_chunks(int64_t tokens, int64_t seqs, int64_t chunk) {
  return (tokens + seqs * (chunk - 1)) / chunk;
}

int64_t ssm_scan_scratch_f32(const SsmLaunch& p) {
  const int64_t nc = ssm_scan_max_chunks(p.x.rows, p.slots.n, p.chunk_size), Q = p.chunk_size;
  return scan::chunks_f32(p) + nc * p.groups * Q * Q + nc * p.heads * p.head_dim * p.state_size;
}

int64_t ssm_scan_scratch_i32(const SsmLaunch& p) {
  return scan::chunks_i32(p);
}

void launch_ssm_scan(const SsmLaunch& p, int* index_errors, void* stream) {
  const Scratch sc = scratch_of(p);
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t nc = sc.max_chunks, Q = p.chunk_size, N = p.state_size, P = p.head_dim;
  const unsigned ptiles = static_cast<unsigned>((P + kPTile - 1) / kPTile);
  with_act(p.x.dt, [&](auto tag) {
    using T = decltype(tag);
    scan::launch_chunk_prologue<T>(p, sc, index_errors, st);
    if (nc > 0) {
      const unsigned tiles = static_cast<unsigned>((Q + 31) / 32);
      chunk_cb_kernel<T>
          <<<dim3(static_cast<unsigned>(nc), static_cast<unsigned>(p.groups), tiles * tiles), 256,
             0, st>>>(p, sc);
      STRATA_CUDA_LAUNCH_CHECK();
      mark_scan_stage("chunk_cb");
      const size_t state_smem = (32 * N + 32 * kPTile) * sizeof(float);
      chunk_state_kernel<T>
          <<<dim3(static_cast<unsigned>(nc), static_cast<unsigned>(p.heads), ptiles), 256,
             state_smem, st>>>(p, sc);
      STRATA_CUDA_LAUNCH_CHECK();
      mark_scan_stage("chunk_state");
    }
    // In place: each chunk's slot changes from its own contribution to the state entering it.
    scan::launch_state_pass<float>(p, sc, sc.states, sc.states, index_errors, st);
    if (nc > 0) {
      const size_t scan_smem = (Q * kPTile + Q + kPTile * N + Q * 33) * sizeof(float);
      if (scan_smem > 48 * 1024)
        STRATA_CUDA_CHECK(cudaFuncSetAttribute(chunk_scan_kernel<T>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(scan_smem)));
      chunk_scan_kernel<T>
          <<<dim3(static_cast<unsigned>(nc), static_cast<unsigned>(p.heads), ptiles),
             static_cast<unsigned>(Q), scan_smem, st>>>(p, sc);
      STRATA_CUDA_LAUNCH_CHECK();
      mark_scan_stage("chunk_scan");
    }
  });
}

}  // namespace strata::cuda
