// The routed experts' grouped GEMMs for W8A8 e4m3 experts on Hopper's FP8 tensor cores
// (wgmma.mma_async, sm_90a): the same work as moe_grouped_swap.cu (weights on the M side, a
// tile's pairs on N; the pairs already bucketed by expert, moe_experts.cu) without converting a
// single code: both operands go global -> shared memory by cp.async and the warpgroup's wgmma
// reads them from there as e4m3.
//   up:   C[f][n] = W_up[e][f] . xq[pair n]   epilogue h = act(relu(act(C * su))^2), quantized
//   down: C[f][n] = W_down[e][f] . h[pair n]  epilogue d[pair][f] = act(C * sd)
//
// Why (docs/BENCHMARKS.md, issue 10): the mma.sync kernel converts every weight code to f16 once
// per 32 pairs and every pair's code once per warp (Hopper has no e4m3 mma.sync: ptxas emulates
// it the same way), issues 24 mma.sync per warp and 64-byte k-block at 24 pairs, and keeps the
// pairs' rows in a register ring one k-block deep; ncu measured it latency- and issue-bound at
// 4 warps per scheduler (54-63% of DRAM bandwidth at 512 tokens). Here a block's per-stage work
// is a handful of cp.async per thread and 2 MH wgmma instructions.
//
// Block: one warpgroup (128 threads), 64 MH output features (MH = 1 or 2 m64 halves) x up to 32
// pairs (NT n8 tiles, the wgmma's N = 8 NT, a template: no zero columns at few pairs). grid
// (2 max_tiles, ceil(F / 64 MH)) as the swapped kernel: block (2 t + half, y) takes pairs
// 32 half .. + 31 of tile t and features 64 MH y .. + 64 MH - 1.
//
// Shared memory: kStages stages of kKs = 64 bytes of k, each [A: 64 MH rows][B: 32 rows] in
// wgmma's no-swizzle K-major layout: a core matrix is 8 rows x 16 bytes, stored as 128
// contiguous bytes; a stage holds chunk c (16 bytes of k) of row r at c * (rows * 16) + r * 16.
// So for one k32 step (two chunks) the descriptor's leading-dimension offset (the next core
// matrix along K) is rows * 16 bytes and its stride-dimension offset (the next 8 rows) 128.
// The copies: 8 consecutive lanes take the same chunk of 8 consecutive rows (one 128-byte
// shared-memory wavefront, no bank conflicts), a warp 64 bytes of 8 rows.
//
// Sums. Hopper's FP8 tensor cores are said to keep only ~14 bits in a running sum
// (linear_fp8_mma.cuh): every wgmma here starts from zero (scale-d = 0, one k32 step of 32
// exact e4m3 products) and its result is added to f32 sums in registers, as the FP8 decode
// kernels do per mma. The order of those f32 additions is the k order.
#include <cstdlib>

#include "ops/cuda/moe_common.cuh"

namespace strata::cuda::moe {

namespace {

constexpr int kThreads = 128;  // one warpgroup
constexpr int kKs = 64;        // bytes of k per row per stage: 4 chunks, 2 k32 steps
constexpr int kSteps = kKs / 32;
constexpr int kStages = 6;
constexpr int kBRows = 32;  // pairs per block (half a tile)
constexpr int kHalfTile = kTile / 2;
static_assert(kHalfTile == kBRows, "a block takes half a tile");

template <int MH>
constexpr int a_rows() {
  return 64 * MH;
}
template <int MH>
constexpr int stage_bytes() {
  return (a_rows<MH>() + kBRows) * kKs;
}
// F16: fewer e4m3 stages, plus two f16 stages of twice the bytes.
template <bool F16>
constexpr int stages() {
  return F16 ? 4 : kStages;
}
template <int MH, bool F16 = false>
constexpr int smem_bytes() {
  return stages<F16>() * stage_bytes<MH>() + (F16 ? 4 * stage_bytes<MH>() : 0);
}
// Blocks per multiprocessor the launch bounds ask for (what shared memory allows).
template <int MH, bool F16 = false>
constexpr int min_blocks() {
  return F16 ? (MH == 2 ? 2 : 4) : (MH == 2 ? 3 : 6);
}

// 16 bytes global -> shared, L1 bypassed; src_bytes 0 writes zeros. L2_256: the L2 fetches the
// aligned 256 bytes around it (the row's next three stages).
template <bool L2_256>
__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem, int src_bytes) {
  if constexpr (L2_256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor (PTX ISA, wgmma): start address, leading-dimension byte
// offset (K direction), stride-dimension byte offset (M/N direction), each >> 4; no swizzle.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3ffffu) >> 4) |
         static_cast<uint64_t>((lbo & 0x3ffffu) >> 4) << 16 |
         static_cast<uint64_t>((sbo & 0x3ffffu) >> 4) << 32;
}

// Keeps the compiler from moving accesses of the accumulator registers across the wgmma
// fence / wait (the registers are written asynchronously in between).
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define STRATA_WGMMA 1
#endif

// The warpgroup's wgmma fence, commit and wait (sm_90a; elsewhere the kernel is never launched:
// grouped_wgmma_available).
__device__ __forceinline__ void wgmma_fence() {
#ifdef STRATA_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit_wait_all() {
#ifdef STRATA_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}

// d = A (64 x 32, descriptor da) . B (8 NT x 32, descriptor db)^T, e4m3 -> f32, d not read
// (scale-d = 0). d[4 j + 2 v1 + v0]: row 16 warp + grp + 8 v1, column 8 j + 2 tig + v0.
template <int NT>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[4 * NT], uint64_t da, uint64_t db) {
  __trap();
}

#ifdef STRATA_WGMMA
// scale-d is the predicate p, false (from the "r"(0) operand, the asm's last): d = A . B.
#define STRATA_WGMMA_HEAD(N, ZERO)                                   \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " ZERO ", 0;\n"                \
  "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 "
template <>
__device__ __forceinline__ void wgmma_e4m3<1>(float (&d)[4], uint64_t da, uint64_t db) {
  asm volatile(STRATA_WGMMA_HEAD(8, "%6") "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(da), "l"(db), "r"(0));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<2>(float (&d)[8], uint64_t da, uint64_t db) {
  asm volatile(STRATA_WGMMA_HEAD(16, "%10") "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(0));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<3>(float (&d)[12], uint64_t da, uint64_t db) {
  asm volatile(STRATA_WGMMA_HEAD(24, "%14")
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
               : "l"(da), "l"(db), "r"(0));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<4>(float (&d)[16], uint64_t da, uint64_t db) {
  asm volatile(STRATA_WGMMA_HEAD(32, "%18")
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, "
               "%17, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(da), "l"(db), "r"(0));
}
#undef STRATA_WGMMA_HEAD
#endif

// f16 wgmma (F16 variant): d (+)= A (64 x 16 f16) . B (8 NT x 16 f16)^T, f32 sums; scale_d 0:
// d = A . B. Products of e4m3 values in f16 are exact, the sums f32 as in mma.sync (the
// swapped kernel's numerics).
template <int NT>
__device__ __forceinline__ void wgmma_f16(float (&d)[4 * NT], uint64_t da, uint64_t db,
                                          int scale_d) {
  __trap();
}
#ifdef STRATA_WGMMA
#define STRATA_WGMMA_F16_HEAD(N, SCALE)                              \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                \
  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 "
template <>
__device__ __forceinline__ void wgmma_f16<1>(float (&d)[4], uint64_t da, uint64_t db,
                                             int scale_d) {
  asm volatile(STRATA_WGMMA_F16_HEAD(8, "%6") "{%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_f16<2>(float (&d)[8], uint64_t da, uint64_t db,
                                             int scale_d) {
  asm volatile(STRATA_WGMMA_F16_HEAD(16, "%10")
               "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_f16<3>(float (&d)[12], uint64_t da, uint64_t db,
                                             int scale_d) {
  asm volatile(STRATA_WGMMA_F16_HEAD(24, "%14")
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
               : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_f16<4>(float (&d)[16], uint64_t da, uint64_t db,
                                             int scale_d) {
  asm volatile(STRATA_WGMMA_F16_HEAD(32, "%18")
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, "
               "%17, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(da), "l"(db), "r"(scale_d));
}
#undef STRATA_WGMMA_F16_HEAD
#endif

// 16 e4m3 codes (k order) as 16 f16 values, exact: two 16-byte chunks of 8 (k order).
__device__ __forceinline__ void e4m3x16_to_f16(const uint4& v, uint4& lo, uint4& hi) {
  uint32_t r[8];
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint16_t c0 = static_cast<uint16_t>(w[i] & 0xffffu), c1 = static_cast<uint16_t>(w[i] >> 16);
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r[2 * i]) : "h"(c0));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r[2 * i + 1]) : "h"(c1));
  }
  lo = make_uint4(r[0], r[1], r[2], r[3]);
  hi = make_uint4(r[4], r[5], r[6], r[7]);
}

// The block's 64 MH features x the tile's pairs (NT n8 tiles), then the epilogue. F16: every
// stage is converted to f16 into one of two f16 stages (same core-matrix layout, 128 bytes of
// each row: chunk c' = 8 values) and multiplied there with f16 wgmma, sums in the tensor core.
// fence: the generic -> async proxy fence before the tensor cores read what the threads wrote
// (TEMPORARY switch, second GPU run: whether the fence drains the cp.async pipeline).
template <bool UP, int MH, int NT, bool F16>
__device__ __forceinline__ void block_tile(const MoeExpertsLaunch& p, const Scratch& s, int e,
                                           int32_t row0, int rows, int64_t f0, uint8_t* smem,
                                           int fence) {
  constexpr int kA = a_rows<MH>();
  constexpr int kAPer = kA / 32;  // A rows this thread copies per stage
  constexpr int kS = stages<F16>();
  const int64_t K = UP ? p.hidden : p.inter, F = UP ? p.inter : p.hidden;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunk = lane >> 3;  // this thread's 16 bytes of each 64-byte stage row
  const int64_t lane_k = 16 * chunk;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t f16_base = base + kS * stage_bytes<MH>();  // F16: 2 stages of 2 x stage_bytes

  // Copy sources: A rows 8 (warp + 4 j) + lane % 8, B row 8 warp + lane % 8; rows past F or past
  // the block's pairs are zero-filled (their results are not stored).
  const uint8_t* W = static_cast<const uint8_t*>(UP ? p.tables.up[e] : p.tables.down[e]);
  const uint8_t* a_src[kAPer];
  bool a_in[kAPer];
  uint32_t a_dst[kAPer];
#pragma unroll
  for (int j = 0; j < kAPer; ++j) {
    const int r = 8 * (warp + 4 * j) + (lane & 7);
    a_in[j] = f0 + r < F;
    a_src[j] = W + (a_in[j] ? f0 + r : 0) * K + lane_k;
    a_dst[j] = static_cast<uint32_t>(chunk * kA * 16 + r * 16);
  }
  const int br = 8 * warp + (lane & 7);
  const bool b_in = br < rows;
  const int64_t b_pair = s.sorted[row0 + (b_in ? br : 0)];
  const uint8_t* b_src =
      (UP ? s.xq + b_pair * p.hidden : static_cast<const uint8_t*>(s.h) + b_pair * p.inter) +
      lane_k;
  const uint32_t b_dst = static_cast<uint32_t>(kA * kKs + chunk * kBRows * 16 + br * 16);

  const int nk = static_cast<int>((K + kKs - 1) / kKs);
  auto issue = [&](int kb) {  // always commits one group (empty past the end)
    if (kb < nk) {
      const int64_t off = static_cast<int64_t>(kb) * kKs;
      const bool k_in = off + lane_k < K;  // k tail (K is a multiple of 16)
      const uint32_t st = base + static_cast<uint32_t>((kb % kS) * stage_bytes<MH>());
#pragma unroll
      for (int j = 0; j < kAPer; ++j)
        cp_async16<true>(st + a_dst[j], a_in[j] && k_in ? a_src[j] + off : W,
                         a_in[j] && k_in ? 16 : 0);
      if (br < 8 * NT)
        cp_async16<false>(st + b_dst, b_in && k_in ? b_src + off : b_src, b_in && k_in ? 16 : 0);
    }
    cp_async_commit();
  };
  // F16: this thread's own 16-byte copies of stage kb, converted into f16 stage kb % 2, where
  // e4m3 chunk c of row r becomes f16 chunks 2 c, 2 c + 1 (at c' (rows 16) + r 16 per operand).
  auto convert = [&](int kb) {
    const uint8_t* st = smem + (kb % kS) * stage_bytes<MH>();
    uint8_t* st16 = smem + kS * stage_bytes<MH>() + (kb % 2) * 2 * stage_bytes<MH>();
#pragma unroll
    for (int j = 0; j < kAPer; ++j) {
      const int r = 8 * (warp + 4 * j) + (lane & 7);
      uint4 lo, hi;
      e4m3x16_to_f16(*reinterpret_cast<const uint4*>(st + a_dst[j]), lo, hi);
      *reinterpret_cast<uint4*>(st16 + (2 * chunk) * kA * 16 + r * 16) = lo;
      *reinterpret_cast<uint4*>(st16 + (2 * chunk + 1) * kA * 16 + r * 16) = hi;
    }
    if (br < 8 * NT) {
      uint4 lo, hi;
      e4m3x16_to_f16(*reinterpret_cast<const uint4*>(st + b_dst), lo, hi);
      uint8_t* b16 = st16 + kA * 2 * kKs;
      *reinterpret_cast<uint4*>(b16 + (2 * chunk) * kBRows * 16 + br * 16) = lo;
      *reinterpret_cast<uint4*>(b16 + (2 * chunk + 1) * kBRows * 16 + br * 16) = hi;
    }
  };

  float acc[MH][4 * NT] = {};
  float d[kSteps][MH][4 * NT] = {};
#pragma unroll
  for (int st = 0; st < kS - 1; ++st)
    issue(st);
  for (int kb = 0; kb < nk; ++kb) {
    cp_async_wait<kS - 2>();  // this thread's copies of stage kb have landed
    if constexpr (F16) convert(kb);
    // Make the writes visible to the tensor cores' (async proxy) reads, then wait for every
    // thread's.
    if (fence) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();  // also: every warp is past stage kb - 1's wgmma wait (its slot is free)
    issue(kb + kS - 1);
    if constexpr (F16) {
      // 4 k16 steps: f16 chunks 2 k, 2 k + 1 of the f16 stage; sums stay in the tensor core.
      const uint32_t st16 = f16_base + static_cast<uint32_t>((kb % 2) * 2 * stage_bytes<MH>());
#pragma unroll
      for (int h = 0; h < MH; ++h)
        pin(acc[h]);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 2 * kSteps; ++k) {
        const uint64_t db = smem_desc(st16 + kA * 2 * kKs + 2 * k * kBRows * 16, kBRows * 16, 128);
#pragma unroll
        for (int h = 0; h < MH; ++h)
          wgmma_f16<NT>(acc[h], smem_desc(st16 + 2 * k * kA * 16 + 64 * h * 16, kA * 16, 128), db,
                        1);
      }
      wgmma_commit_wait_all();
#pragma unroll
      for (int h = 0; h < MH; ++h)
        pin(acc[h]);
    } else {
      const uint32_t st = base + static_cast<uint32_t>((kb % kS) * stage_bytes<MH>());
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
#pragma unroll
        for (int h = 0; h < MH; ++h)
          pin(d[k][h]);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        // Chunks 2 k, 2 k + 1 of the stage: A rows 64 h.., B rows 0.. (LBO: next chunk).
        const uint64_t db = smem_desc(st + kA * kKs + 2 * k * kBRows * 16, kBRows * 16, 128);
#pragma unroll
        for (int h = 0; h < MH; ++h)
          wgmma_e4m3<NT>(d[k][h], smem_desc(st + 2 * k * kA * 16 + 64 * h * 16, kA * 16, 128),
                         db);
      }
      wgmma_commit_wait_all();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
#pragma unroll
        for (int h = 0; h < MH; ++h) {
          pin(d[k][h]);
#pragma unroll
          for (int i = 0; i < 4 * NT; ++i)
            acc[h][i] += d[k][h][i];
        }
    }
  }
  cp_async_wait<0>();

  // acc[h][4 j + 2 v1 + v0]: feature f0 + 64 h + 16 warp + grp + 8 v1, pair 8 j + 2 tig + v0.
  const int grp = lane >> 2, tig = lane & 3;
  const float scale = UP ? up_scale(p, e) : down_scale(p, e);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int v0 = 0; v0 < 2; ++v0) {
      const int n = 8 * j + 2 * tig + v0;
      if (n >= rows) continue;
      const int64_t pair = s.sorted[row0 + n];
#pragma unroll
      for (int h = 0; h < MH; ++h) {
#pragma unroll
        for (int v1 = 0; v1 < 2; ++v1) {
          const int64_t f = f0 + 64 * h + 16 * warp + grp + 8 * v1;
          if (f >= F) continue;
          const float v = acc[h][4 * j + 2 * v1 + v0] * scale;
          if (UP)
            store_hidden<bf16>(p, s, e, pair, f, v);
          else
            static_cast<bf16*>(s.d)[pair * p.hidden + f] = __float2bfloat16_rn(v);
        }
      }
    }
  }
}

// grid (2 max_tiles, ceil(F / 64 MH)), kThreads threads, smem_bytes<MH, F16>() of shared memory.
template <bool UP, int MH, bool F16>
__global__ void __launch_bounds__(kThreads, min_blocks<MH, F16>())
    grouped_wgmma_kernel(MoeExpertsLaunch p, Scratch s, int fence) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tile = blockIdx.x >> 1, half = blockIdx.x & 1;
  const int e = s.tiles[2 * tile];
  if (e < 0) return;
  const int32_t row0 = s.tiles[2 * tile + 1] + kHalfTile * half;
  const int rows = min(kHalfTile, s.offsets[e] + s.counts[e] - row0);
  if (rows <= 0) return;
  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * a_rows<MH>();
  switch ((rows + 7) / 8) {
    case 1:
      block_tile<UP, MH, 1, F16>(p, s, e, row0, rows, f0, smem, fence);
      break;
    case 2:
      block_tile<UP, MH, 2, F16>(p, s, e, row0, rows, f0, smem, fence);
      break;
    case 3:
      block_tile<UP, MH, 3, F16>(p, s, e, row0, rows, f0, smem, fence);
      break;
    default:
      block_tile<UP, MH, 4, F16>(p, s, e, row0, rows, f0, smem, fence);
      break;
  }
}

template <bool UP, int MH, bool F16>
void launch_one(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [] {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_wgmma_kernel<UP, MH, F16>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_bytes<MH, F16>()));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_wgmma_kernel<UP, MH, F16>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t F = UP ? p.inter : p.hidden;
  const dim3 grid(static_cast<unsigned>(2 * max_tiles),
                  static_cast<unsigned>((F + a_rows<MH>() - 1) / a_rows<MH>()));
  static const int fence = [] {  // TEMPORARY (second GPU run): STRATA_WGMMA_FENCE=0 drops it
    const char* v = std::getenv("STRATA_WGMMA_FENCE");
    return v && v[0] == '0' ? 0 : 1;
  }();
  grouped_wgmma_kernel<UP, MH, F16>
      <<<grid, kThreads, smem_bytes<MH, F16>(), stream>>>(p, s, fence);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <int MH, bool F16>
void launch_pair(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                 cudaStream_t stream) {
  launch_one<true, MH, F16>(p, s, max_tiles, stream);
  launch_one<false, MH, F16>(p, s, max_tiles, stream);
}

}  // namespace

void launch_grouped_wgmma(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                          cudaStream_t stream) {
  if (!p.w8a8) STRATA_CUDA_FAIL("moe grouped_wgmma: W8A8 e4m3 experts only");
  const bool narrow = (p.swap_variant & kSwapWgmmaNarrow) != 0;
  if ((p.swap_variant & kSwapWgmmaF16) != 0) {
    if (narrow)
      launch_pair<1, true>(p, s, max_tiles, stream);
    else
      launch_pair<2, true>(p, s, max_tiles, stream);
  } else if (narrow) {
    launch_pair<1, false>(p, s, max_tiles, stream);
  } else {
    launch_pair<2, false>(p, s, max_tiles, stream);
  }
}

}  // namespace strata::cuda::moe

namespace strata::cuda {

bool grouped_wgmma_available() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return false;
    return major == 9 && minor == 0;
  }();
  return ok;
}

}  // namespace strata::cuda
