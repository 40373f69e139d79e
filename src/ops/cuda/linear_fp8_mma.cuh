// The FP8 decode GEMV core on the tensor cores, shared by the small-M FP8 linear
// (linear_fp8_gemv.cu) and the MoE decode kernels with e4m3 experts (moe_fp8_decode.cu).
//
// A block of 8 warps computes one tile of 16 weight rows (an mma M tile) against M <= 16
// tokens. The weight rows are the mma's A operand, read straight from global memory in 16-byte
// pieces (read once: L1 bypassed); the tokens' activations are the B operand, staged once per
// block in shared memory (quantized there for W8A8) and padded with zero columns to 8 (or 16)
// tokens. The 8 warps split K; each lane keeps 2 x U 16-byte weight loads in flight, and the
// first batch is issued before the activations are staged, so the two latencies overlap.
//
// K is consumed in chunks of 64 bytes per weight row. In a chunk, lane (g = lane / 4,
// t = lane % 4) holds bytes [16 t, 16 t + 16) of rows g and g + 8 and the same 16 k positions
// of token g. The fragments of mma.sync give each lane a set of logical k indices; a dot
// product does not care which k is which, so A and B just use the same physical positions:
//   W8A8  (m16n8k32, e4m3 x e4m3, 2 per chunk): mma h takes words 2h, 2h+1 of the lane's 16
//         bytes as a0 / a2 (row g; a1 / a3 from row g + 8) and as b0 / b1 (token g).
//         Check: a0 and b0 both hold logical k 4t..4t+3, a2 and b1 both 16+4t..16+4t+3.
//   W8A16 (m16n8k16, bf16, 4 per chunk): each weight word (4 e4m3) becomes two bf16x2 words
//         (exact); mma j takes the pair (bytes 4j, 4j+1) as a0 / b0 and (4j+2, 4j+3) as a2 / b1
//         (a0, b0: logical k 2t, 2t+1; a2, b1: 2t+8, 2t+9).
// Sums are f32: each e4m3 mma starts from zero and is added to the lane's f32 sums (Hopper's FP8
// tensor cores keep only ~14 bits in a running sum); the four bf16 mmas of a chunk accumulate
// in the tensor core (f32) and are added per chunk. The 8 warps' sums are added in warp order,
// so results do not depend on timing.
// Speed (docs/BENCHMARKS.md): the fragment layout makes each 16-byte load instruction cover 64
// bytes of each of 8 rows, half a 128-byte line per row, and the kernel reaches 32-60% of the
// H200's read ceiling, not the 70% it was built for (cuBLASLt's FP8 GEMM: 53% on the Nano-3
// in_proj). linear_fp8_stream.cuh stages the weights through shared memory with whole-line
// cp.async copies and reads the fragments from there (cuda.fp8_stream, registered first); this
// register core stays registered behind it.
#pragma once

#include <atomic>

#include "ops/cuda/gemv.cuh"

namespace strata::cuda::fp8 {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;                  // weight rows per block (one mma M tile)
constexpr int kChunk = 64;                     // k values (= weight bytes) per row per chunk
constexpr int kMaxTokens = 16;                 // two mma N tiles of 8
constexpr int64_t kMaxStageBytes = 48 * 1024;  // staged B operand: the default smem limit

// How the staged B operand holds one value.
enum class BKind { E4M3, BF16 };

template <BKind B>
__host__ __device__ constexpr int64_t b_bytes() {
  return B == BKind::E4M3 ? 1 : 2;
}

__host__ __device__ constexpr int64_t padded_k(int64_t K) {
  return (K + kChunk - 1) / kChunk * kChunk;
}

// Row stride (bytes) of the staged B operand: the zero-padded row plus an offset that puts
// tokens g and g + 1 in different banks for one quarter-warp's 16-byte reads (e4m3: lanes read
// 64 contiguous bytes per token, stride = 64 mod 128; bf16: 32-byte steps, stride = 16 mod 128).
template <BKind B>
__host__ __device__ constexpr int64_t stage_stride(int64_t K) {
  const int64_t bytes = padded_k(K) * b_bytes<B>();
  if (B == BKind::E4M3) return bytes % 128 == 0 ? bytes + 64 : bytes;
  return bytes + 16;
}

// Chunks per load batch: a lane keeps 2 x 4 loads of 16 bytes in flight (80 registers, three
// blocks per multiprocessor). Measured on the H200 against 6 and 8 (one batch per warp for the
// Nano-3 widths, but 2 blocks per multiprocessor or spills): 4 was fastest on 10 of the 12 rows
// of docs/BENCHMARKS.md, so more resident warps beat deeper batches here.
constexpr int kBatch = 4;

// Blocks per multiprocessor the kernels ask the register allocator for (__launch_bounds__):
// 3 with one N tile (80 registers), 2 with two.
constexpr int min_blocks(int NT) {
  return NT == 1 ? 3 : 2;
}

// Lets Kernel take kMaxStageBytes of dynamic shared memory when a block needs more than the
// default 48 KB (static included): set once per device and kernel, on the first launch that
// needs it (not again while a graph may be capturing).
template <auto Kernel>
void fit_smem(size_t dynamic, size_t static_bytes) {
  if (dynamic + static_bytes <= 48 * 1024) return;
  static std::atomic<uint64_t> raised{0};  // one bit per device
  int device = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (raised.load(std::memory_order_acquire) & bit) return;
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kMaxStageBytes)));
  raised.fetch_or(bit, std::memory_order_acq_rel);
}

// ---- fragments ----

// d = A (16 x 32 e4m3, row) * B (32 x 8 e4m3, col), from zero.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.f), "f"(0.f), "f"(0.f),
        "f"(0.f));
}

// c += A (16 x 16 bf16, row) * B (16 x 8 bf16, col), f32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four e4m3 values (byte i = value i) -> bf16x2 words (values 0, 1) and (2, 3), exactly.
// A byte b becomes the bf16 bits (b & 0x80) << 8 | (b & 0x7f) << 4: e4m3's exponent and
// mantissa land in bf16's fields with the exponent bias 120 short (127 - 7), which one exact
// multiply by 2^120 restores; e4m3 subnormals become bf16 subnormals that the multiply
// normalizes. (The NaN codes 0x7f / 0xff become +-480; weights are finite by construction.)
__device__ __forceinline__ void e4m3x4_to_bf16x4(uint32_t v, uint32_t& w01, uint32_t& w23) {
  const uint32_t t01 = __byte_perm(v, 0u, 0x1404);  // b1 << 24 | b0 << 8
  const uint32_t t23 = __byte_perm(v, 0u, 0x3424);  // b3 << 24 | b2 << 8
  const uint32_t m01 = ((t01 >> 4) & 0x07f007f0u) | (t01 & 0x80008000u);
  const uint32_t m23 = ((t23 >> 4) & 0x07f007f0u) | (t23 & 0x80008000u);
  constexpr uint32_t kTwo120 = 0x7b807b80u;  // bf16x2 (2^120, 2^120)
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(w01) : "r"(m01), "r"(kTwo120));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(w23) : "r"(m23), "r"(kTwo120));
}

// Four bf16 values (two words, value 0 in the low half) -> e4m3(v / s), byte i = value i.
// Division (not a reciprocal multiply): the host quantizer's rounding.
__device__ __forceinline__ uint32_t quantize4(uint32_t w01, uint32_t w23, float s) {
  const float2 a =
      make_float2(__uint_as_float(w01 << 16) / s, __uint_as_float(w01 & 0xffff0000u) / s);
  const float2 b =
      make_float2(__uint_as_float(w23 << 16) / s, __uint_as_float(w23 & 0xffff0000u) / s);
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// ---- staging the B operand ----

// Staging moves 8 values at a time: 16 bytes of bf16 or 8 bytes of e4m3 (in .x, .y).
template <class TX>
__device__ __forceinline__ uint4 load8(const TX* x, bool in) {
  if (!in) return make_uint4(0u, 0u, 0u, 0u);
  if constexpr (sizeof(TX) == 2) return *reinterpret_cast<const uint4*>(x);
  const uint2 v = *reinterpret_cast<const uint2*>(x);
  return make_uint4(v.x, v.y, 0u, 0u);
}
template <BKind B, bool Q>
__device__ __forceinline__ void store8(const uint4& v, float in_scale, uint8_t* dst) {
  if constexpr (B == BKind::BF16)
    *reinterpret_cast<uint4*>(dst) = v;
  else if constexpr (Q)
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(quantize4(v.x, v.y, in_scale), quantize4(v.z, v.w, in_scale));
  else
    *reinterpret_cast<uint2*>(dst) = make_uint2(v.x, v.y);
}

// Stages M token rows (row stride ldx elements) into shared memory `xs` (row stride `stride`
// bytes), zero-filled from K to padded_k(K):
//   Q (W8A8): e4m3(x / in_scale) from bf16 x;  otherwise a copy (bf16 -> bf16, e4m3 -> e4m3).
// Rows must be 16-byte (bf16) or 8-byte (e4m3) aligned and K % 8 == 0. Every thread of the block
// takes part, four loads in flight each; the caller synchronizes before reading.
template <BKind B, bool Q, class TX>
__device__ __forceinline__ void stage_b(const TX* __restrict__ x, int64_t ldx, int M, int64_t K,
                                        float in_scale, uint8_t* xs, int64_t stride) {
  static_assert(B == BKind::BF16 ? (!Q && sizeof(TX) == 2) : (sizeof(TX) == (Q ? 2 : 1)),
                "staging: bf16 copies bf16, W8A8 quantizes bf16, e4m3 copies e4m3");
  constexpr int kInFlight = 4;
  const int groups = static_cast<int>(padded_k(K) / 8), total = M * groups;
  const int step = static_cast<int>(blockDim.x);
  for (int i0 = threadIdx.x; i0 < total; i0 += kInFlight * step) {
    uint4 v[kInFlight];
    int64_t at[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = i0 + u * step, m = i / groups;
      const int64_t k = static_cast<int64_t>(i - m * groups) * 8;
      at[u] = i < total ? m * stride + k * b_bytes<B>() : -1;
      v[u] = load8(x + m * ldx + k, i < total && k < K);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (at[u] >= 0) store8<B, Q>(v[u], in_scale, xs + at[u]);
  }
}

// ---- the warp's share of a tile ----

// One lane's view of the 16-row tile: its rows g and g + 8, at byte 16 t of each chunk.
struct TileRows {
  const uint8_t* lo;
  const uint8_t* hi;
  bool lo_ok, hi_ok;
  int64_t K;
};

// w: the tile's first row (rows of K e4m3 bytes, 16-byte aligned); rows: valid rows (<= 16).
__device__ __forceinline__ TileRows tile_rows(const uint8_t* w, int rows, int64_t K) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  TileRows r;
  r.lo = w + static_cast<int64_t>(g) * K + 16 * t;
  r.hi = w + static_cast<int64_t>(g + 8) * K + 16 * t;
  r.lo_ok = g < rows;
  r.hi_ok = g + 8 < rows;
  r.K = K;
  return r;
}

__device__ __forceinline__ uint4 load_w16(const uint8_t* p, bool ok) {
  return ok ? load_stream16(p) : make_uint4(0u, 0u, 0u, 0u);
}

// Issues the weight loads of chunks [c, min(c + U, c1)) (zeros past K, past the tile's rows and
// past c1).
template <int U>
__device__ __forceinline__ void load_batch(const TileRows& w, int c, int c1, uint4 (&alo)[U],
                                           uint4 (&ahi)[U]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t off = static_cast<int64_t>(c + u) * kChunk;
    const bool in = c + u < c1 && off + 16 * t < w.K;
    alo[u] = load_w16(w.lo + off, in && w.lo_ok);
    ahi[u] = load_w16(w.hi + off, in && w.hi_ok);
  }
}

__device__ __forceinline__ void add4(float (&acc)[4], const float (&d)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    acc[i] += d[i];
}

// Multiplies the loaded chunks with the staged tokens: acc[nt] gets the mma accumulator layout
// of N tile nt (rows g, g + 8; tokens 8 nt + 2 t, 8 nt + 2 t + 1).
template <BKind B, int NT, int U>
__device__ __forceinline__ void mma_batch(const uint4 (&alo)[U], const uint4 (&ahi)[U], int c,
                                          int c1, const uint8_t* xs, int64_t stride, int M,
                                          float (&acc)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (c + u >= c1) break;
    const int64_t k = static_cast<int64_t>(c + u) * kChunk + 16 * t;  // the lane's first k
    if constexpr (B == BKind::E4M3) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int m = 8 * nt + g;
        const uint4 b = m < M ? *reinterpret_cast<const uint4*>(xs + m * stride + k) : zero;
        float d[4];
        mma_e4m3(d, alo[u].x, ahi[u].x, alo[u].y, ahi[u].y, b.x, b.y);
        add4(acc[nt], d);
        mma_e4m3(d, alo[u].z, ahi[u].z, alo[u].w, ahi[u].w, b.z, b.w);
        add4(acc[nt], d);
      }
    } else {
      const uint32_t wl[4] = {alo[u].x, alo[u].y, alo[u].z, alo[u].w};
      const uint32_t wh[4] = {ahi[u].x, ahi[u].y, ahi[u].z, ahi[u].w};
      uint32_t l[8], h[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        e4m3x4_to_bf16x4(wl[j], l[2 * j], l[2 * j + 1]);
        e4m3x4_to_bf16x4(wh[j], h[2 * j], h[2 * j + 1]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int m = 8 * nt + g;
        const uint8_t* bp = xs + m * stride + 2 * k;
        const uint4 b0 = m < M ? *reinterpret_cast<const uint4*>(bp) : zero;
        const uint4 b1 = m < M ? *reinterpret_cast<const uint4*>(bp + 16) : zero;
        const uint32_t bw[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_bf16(d, l[2 * j], h[2 * j], l[2 * j + 1], h[2 * j + 1], bw[2 * j], bw[2 * j + 1]);
        add4(acc[nt], d);
      }
    }
  }
}

// The warp's chunks [c0, c1) of the tile: the first batch must already be loaded into alo / ahi
// (load_batch(w, c0, c1, ...)) and the B operand staged and synchronized.
template <BKind B, int NT, int U>
__device__ __forceinline__ void warp_dot(const TileRows& w, int c0, int c1, uint4 (&alo)[U],
                                         uint4 (&ahi)[U], const uint8_t* xs, int64_t stride, int M,
                                         float (&acc)[NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[nt][i] = 0.f;
  for (int c = c0; c < c1; c += U) {
    if (c != c0) load_batch<U>(w, c, c1, alo, ahi);
    mma_batch<B, NT, U>(alo, ahi, c, c1, xs, stride, M, acc);
  }
}

// The warp's share of K: chunks [c0, c1) of padded_k(K) / kChunk, balanced over the 8 warps.
__device__ __forceinline__ void warp_chunks(int64_t K, int& c0, int& c1) {
  const int chunks = static_cast<int>(padded_k(K) / kChunk), warp = threadIdx.x >> 5;
  c0 = static_cast<int>(static_cast<int64_t>(warp) * chunks / kWarps);
  c1 = static_cast<int>(static_cast<int64_t>(warp + 1) * chunks / kWarps);
}

// Shared memory of tile_sum: the 8 warps' accumulators.
template <int NT>
struct TileRed {
  float v[kWarps][NT * 4][32];
};

// Adds the 8 warps' sums in warp order and calls f(r, m, sum) for every row r < rows and token
// m < M of the tile (one thread each). Starts and ends with the block synchronized.
template <int NT, class F>
__device__ __forceinline__ void tile_sum(const float (&acc)[NT][4], TileRed<NT>& red, int rows,
                                         int M, F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      red.v[warp][nt * 4 + i][lane] = acc[nt][i];
  __syncthreads();
  for (int j = threadIdx.x; j < kTileRows * M; j += blockDim.x) {
    const int r = j % kTileRows, m = j / kTileRows;
    const int nt = m / 8, mm = m % 8;
    // Accumulator i of lane (g, t) holds row g + 8 (i / 2), token 2 t + (i % 2) of tile nt.
    const int i = (r / 8) * 2 + (mm & 1), ln = (r % 8) * 4 + mm / 2;
    float s = 0.f;
#pragma unroll
    for (int wp = 0; wp < kWarps; ++wp)
      s += red.v[wp][nt * 4 + i][ln];
    if (r < rows) f(r, m, s);
  }
  __syncthreads();
}

}  // namespace strata::cuda::fp8
