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
template <int MH>
constexpr int smem_bytes() {
  return kStages * stage_bytes<MH>();
}
// Blocks per multiprocessor the launch bounds ask for (what shared memory allows).
template <int MH>
constexpr int min_blocks() {
  return MH == 2 ? 3 : 6;
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

// The block's 64 MH features x the tile's pairs (NT n8 tiles), then the epilogue.
template <bool UP, int MH, int NT>
__device__ __forceinline__ void block_tile(const MoeExpertsLaunch& p, const Scratch& s, int e,
                                           int32_t row0, int rows, int64_t f0, uint8_t* smem,
                                           int desc_swap) {
  constexpr int kA = a_rows<MH>();
  constexpr int kAPer = kA / 32;  // A rows this thread copies per stage
  const int64_t K = UP ? p.hidden : p.inter, F = UP ? p.inter : p.hidden;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunk = lane >> 3;  // this thread's 16 bytes of each 64-byte stage row
  const int64_t lane_k = 16 * chunk;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

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
      const uint32_t st = base + static_cast<uint32_t>((kb % kStages) * stage_bytes<MH>());
#pragma unroll
      for (int j = 0; j < kAPer; ++j)
        cp_async16<true>(st + a_dst[j], a_in[j] && k_in ? a_src[j] + off : W,
                         a_in[j] && k_in ? 16 : 0);
      if (br < 8 * NT)
        cp_async16<false>(st + b_dst, b_in && k_in ? b_src + off : b_src, b_in && k_in ? 16 : 0);
    }
    cp_async_commit();
  };

  float acc[MH][4 * NT] = {};
  float d[kSteps][MH][4 * NT] = {};
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st)
    issue(st);
  for (int kb = 0; kb < nk; ++kb) {
    cp_async_wait<kStages - 2>();  // this thread's copies of stage kb have landed
    // Make them visible to the tensor cores' (async proxy) reads, then wait for every thread's.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();  // also: every warp is past stage kb - 1's wgmma wait (its slot is free)
    issue(kb + kStages - 1);
    const uint32_t st = base + static_cast<uint32_t>((kb % kStages) * stage_bytes<MH>());
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
#pragma unroll
      for (int h = 0; h < MH; ++h)
        pin(d[k][h]);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      // Chunks 2 k, 2 k + 1 of the stage: A rows 64 h.., B rows 0.. (LBO: next chunk).
      const uint32_t b_lbo = desc_swap ? 128 : kBRows * 16, b_sbo = desc_swap ? kBRows * 16 : 128;
      const uint32_t a_lbo = desc_swap ? 128 : kA * 16, a_sbo = desc_swap ? kA * 16 : 128;
      const uint64_t db = smem_desc(st + kA * kKs + 2 * k * kBRows * 16, b_lbo, b_sbo);
#pragma unroll
      for (int h = 0; h < MH; ++h)
        wgmma_e4m3<NT>(d[k][h], smem_desc(st + 2 * k * kA * 16 + 64 * h * 16, a_lbo, a_sbo), db);
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

// grid (2 max_tiles, ceil(F / 64 MH)), kThreads threads, smem_bytes<MH>() of shared memory.
template <bool UP, int MH>
__global__ void __launch_bounds__(kThreads, min_blocks<MH>())
    grouped_wgmma_kernel(MoeExpertsLaunch p, Scratch s, int desc_swap) {
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
      block_tile<UP, MH, 1>(p, s, e, row0, rows, f0, smem, desc_swap);
      break;
    case 2:
      block_tile<UP, MH, 2>(p, s, e, row0, rows, f0, smem, desc_swap);
      break;
    case 3:
      block_tile<UP, MH, 3>(p, s, e, row0, rows, f0, smem, desc_swap);
      break;
    default:
      block_tile<UP, MH, 4>(p, s, e, row0, rows, f0, smem, desc_swap);
      break;
  }
}

template <bool UP, int MH>
void launch_one(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [] {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_wgmma_kernel<UP, MH>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_bytes<MH>()));
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_wgmma_kernel<UP, MH>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t F = UP ? p.inter : p.hidden;
  const dim3 grid(static_cast<unsigned>(2 * max_tiles),
                  static_cast<unsigned>((F + a_rows<MH>() - 1) / a_rows<MH>()));
  static const int desc_swap = [] {  // TEMPORARY (first GPU run): LBO/SBO roles swapped
    const char* v = std::getenv("STRATA_WGMMA_DESC_SWAP");
    return v && v[0] == '1' ? 1 : 0;
  }();
  grouped_wgmma_kernel<UP, MH><<<grid, kThreads, smem_bytes<MH>(), stream>>>(p, s, desc_swap);
  STRATA_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_grouped_wgmma(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                          cudaStream_t stream) {
  if (!p.w8a8) STRATA_CUDA_FAIL("moe grouped_wgmma: W8A8 e4m3 experts only");
  if ((p.swap_variant & kSwapWgmmaNarrow) != 0) {
    launch_one<true, 1>(p, s, max_tiles, stream);
    launch_one<false, 1>(p, s, max_tiles, stream);
  } else {
    launch_one<true, 2>(p, s, max_tiles, stream);
    launch_one<false, 2>(p, s, max_tiles, stream);
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
