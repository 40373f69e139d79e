// The routed experts' grouped GEMMs for few tokens per expert (a prefill of hundreds of tokens,
// a batched decode step): weights on mma's M side, the tile's pairs on its N side.
//
// The pairs are already bucketed by expert (moe_experts.cu) and cut into tiles of up to 64
// sorted rows of one expert. One launch does the up projection of every tile, one the down:
//   up:   C[f][n] = W_up[e][f] . A[n],  A[n] = x[token] (bf16) or xq[pair] (e4m3, W8A8)
//         epilogue h = act(relu(act(C * su))^2), stored act or quantized with down_in (W8A8)
//   down: C[f][n] = W_down[e][f] . h[n], epilogue d[pair][f] = act(C * sd)
// With ~24 pairs per expert (512 tokens) or ~3 (a batch of 64), the cost should be streaming
// the experts' weights once; the shared-memory tiles of moe_grouped_mma.cu are bound by
// shared-memory traffic there. Here a warp owns 32 output features (two m16 tiles) for up to 32
// of a tile's pairs (NT = ceil(pairs / 8) n8 tiles, 1..4, a template so small tiles multiply no
// zero columns; all 64 pairs of a tile in one warp needs ~228 registers, measured with ptxas):
// every weight byte is copied once per 32 pairs by the one warp that uses it, 16 bytes per lane
// and row, through a private shared-memory ring (written and read back by the same lane: no
// bank conflicts, no synchronization; a register ring 2-3 k-blocks deep measured the same on
// the H200, within 4%); the pairs' rows (small, read by every warp of the tile) come through
// the caches into a register ring. Measured on the H200 (docs/BENCHMARKS.md, issue 10, "moe3"),
// Nano-3 W8A8 MoE op per layer, uniform routing: 667 -> 462 us at 512 tokens and 487 -> 342 us at
// 64 (60.8% and 77.3% of the read ceiling) with the L2 prefetch hint and the cvt conversion
// (cuda.grouped_swap_cvt) against the first version (cuda.grouped_swap).
//
// k permutation. mma.m16n8k16 (PTX ISA), lane = 4 grp + tig: A's registers a0..a3 hold rows
// (grp, grp + 8) at k slots (2 tig, 2 tig + 1) and (8 + 2 tig, 9 + 2 tig); B's b0, b1 hold column
// grp at the same k slots. A dot product does not depend on the order of k, so any bijection
// between memory and k slots works if A and B use the same one. Here a k-block is 64 bytes of
// every row and lane tig loads bytes [16 tig, 16 tig + 16) of it (one 16-byte load per row) for
// both operands; word w (bytes 4w..4w+3 of the 16) feeds the mma k step s:
//   e4m3: 4 steps per k-block, step s = word s: bytes 0, 1 -> slots 2 tig, 2 tig + 1 (a0/a1, b0);
//         bytes 2, 3 -> slots 8 + 2 tig, 9 + 2 tig (a2/a3, b1); converted to f16 (below).
//   bf16: 2 steps per k-block, step s = words 2s (slots 2 tig, 2 tig + 1) and 2s + 1 (slots
//         8 + 2 tig, 9 + 2 tig), used as they are.
//
// e4m3 (W8A8): both operands are converted to f16 in registers and multiplied with mma f16 ->
// f32 (sm_90 has no e4m3 mma.sync of its own): with kSwapCvt by the cvt instruction (exact
// values, one instruction per two codes), otherwise by integer operations (e4m3_f16_bits.h:
// exact, each value times 2^-8, four operations per two codes; the epilogue scale carries the
// 2^16). The conversions bound the first version: cvt measured 31% faster at 512 tokens.
//
// Variants (kSwap* flags, moe.h), registered under their own names for A/B runs: the L2 256-byte
// prefetch hint on the weight copies (the DRAM reads 256 bytes of a row at a time instead of 64:
// 26% faster at 64 tokens) and the cvt conversion, together cuda.grouped_swap_cvt; with split-K
// (two warps per 32 features, "moe4": 69 against 63% of the read ceiling at T = 8, slower from
// T = 256), cuda.grouped_swap_split; neither, cuda.grouped_swap. Also measured and dropped
// (docs/BENCHMARKS.md): the conversions split between the cvt and integer pipes, the pairs' rows
// through the cp.async ring, a 4-way split, f16 activations (xq and h as f16: slower at every
// T >= 16), and the down GEMM as a programmatic dependent launch that read before its wait (wrong
// results; both GEMMs are now launched by pdl.cuh's contract, the wait first).
#include "ops/cuda/e4m3_f16_bits.h"
#include "ops/cuda/moe_common.cuh"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda::moe {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpF = 32;                // output features per warp
constexpr int kBlockF = kWarps * kWarpF;  // output features per block
constexpr int kKBlock = 64;               // bytes of k per row per k-block (16 per lane)
constexpr int kHalfTile = kTile / 2;      // pairs per block: at most 4 n8 tiles

// The weights' k-blocks go through a per-warp shared-memory ring of kStages (cp.async: no
// registers held while in flight), the pairs' rows through a register ring of b_depth(NT).
constexpr int kStages = 6;
constexpr int kStageBytes = 4 * 32 * 16;  // 4 rows per lane x 32 lanes x 16 bytes
constexpr int kSmemBytes = kWarps * kStages * kStageBytes;
constexpr int b_depth(int nt) {
  return nt <= 2 ? 3 : 2;
}

// 16 bytes global -> shared, L1 bypassed; src_bytes 0 writes zeros and reads nothing. With
// L2_256: the L2 also fetches the rest of the aligned 256 bytes (the row's next three k-blocks),
// so the DRAM sees 256-byte reads instead of 64-byte pieces of ~67K interleaved rows.
template <bool L2_256>
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (L2_256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem),
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

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Codes (bytes 0, 1), or (2, 3) with HI, of v as f16x2. HW: the sm_89+ conversion instruction
// (exact values, one instruction per two codes); otherwise the integer spread (exact values x
// 2^-8, four integer operations per two codes).
template <bool HW, bool HI>
__device__ __forceinline__ uint32_t f16x2_of(uint32_t v) {
  if constexpr (HW) {
    uint32_t r;
    const uint16_t codes = static_cast<uint16_t>(HI ? v >> 16 : v & 0xffffu);
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(codes));
    return r;
  } else {
    return e4m3x2_spread_to_f16x2(HI ? e4m3_spread_hi(v) : e4m3_spread_lo(v));
  }
}

template <bool FP8>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (FP8)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One k-block's products: a[mt][h] is row grp + 8 h of m16 tile mt, b[nt] column grp of n8
// tile nt (the lane's 16 bytes each).
// V (kSwap* flags, moe.h): kSwapCvt converts both operands with the cvt instruction.
template <bool FP8, int NT, int V>
__device__ __forceinline__ void kblock_mma(float (&acc)[2][NT][4], const uint4 (&a)[2][2],
                                           const uint4 (&b)[NT]) {
  constexpr int kSteps = FP8 ? 4 : 2;
  constexpr bool kCvt = (V & kSwapCvt) != 0;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    uint32_t af[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if constexpr (FP8) {
        const uint32_t w0 = word(a[mt][0], s), w1 = word(a[mt][1], s);
        af[mt][0] = f16x2_of<kCvt, false>(w0);
        af[mt][1] = f16x2_of<kCvt, false>(w1);
        af[mt][2] = f16x2_of<kCvt, true>(w0);
        af[mt][3] = f16x2_of<kCvt, true>(w1);
      } else {
        af[mt][0] = word(a[mt][0], 2 * s);
        af[mt][1] = word(a[mt][1], 2 * s);
        af[mt][2] = word(a[mt][0], 2 * s + 1);
        af[mt][3] = word(a[mt][1], 2 * s + 1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b0, b1;
      if constexpr (FP8) {
        const uint32_t w = word(b[nt], s);
        b0 = f16x2_of<kCvt, false>(w);
        b1 = f16x2_of<kCvt, true>(w);
      } else {
        b0 = word(b[nt], 2 * s);
        b1 = word(b[nt], 2 * s + 1);
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        mma16816<FP8>(acc[mt][nt], af[mt], b0, b1);
    }
  }
}

// Warps that share a feature group and split its k-blocks with kSwapSplitK (any divisor of
// kWarps works; 4 measured slower than 2 from T = 16 on the H200, docs/BENCHMARKS.md "moe4").
constexpr int kSplitWays = 2;
template <int V>
constexpr int split_of() {
  return (V & kSwapSplitK) != 0 ? kSplitWays : 1;
}

// The warp's 32 features x the tile's pairs (NT n8 tiles), the weights through the warp's
// shared-memory ring `ring` (kStages x kStageBytes), then the epilogue. Split (split_of<V>() =
// S > 1): warps w with the same w / S share 32 features and warp w takes k-blocks w % S,
// w % S + S, ...; the group's first warp adds the others' sums (through `smem`, the block's
// shared memory) before the epilogue.
template <bool FP8, bool UP, int NT, int V>
__device__ __forceinline__ void warp_tile(const MoeExpertsLaunch& p, const Scratch& s, int e,
                                          int32_t row0, int rows, int64_t fw, uint8_t* ring,
                                          uint8_t* smem) {
  constexpr int64_t kElem = FP8 ? 1 : 2;
  constexpr bool kL2 = (V & kSwapL2Prefetch) != 0;
  constexpr int kSplit = split_of<V>();
  const int k_first = static_cast<int>(threadIdx.x >> 5) % kSplit;
  const int64_t K = UP ? p.hidden : p.inter, F = UP ? p.inter : p.hidden;
  const int64_t kbytes = K * kElem;
  const int lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
  const int64_t lane_k = 16 * tig;

  // Rows past F or past the tile's pairs repeat a valid row; their results are not stored.
  const uint8_t* W = static_cast<const uint8_t*>(UP ? p.tables.up[e] : p.tables.down[e]);
  const uint8_t* a_row[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      a_row[mt][h] = W + min(fw + mt * 16 + grp + 8 * h, F - 1) * kbytes + lane_k;
  const uint8_t* b_row[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int n = nt * 8 + grp;
    const int64_t pair = s.sorted[row0 + (n < rows ? n : 0)];
    if (UP && !FP8)
      b_row[nt] = static_cast<const uint8_t*>(p.x.p) + (pair / p.top_k) * p.x.ld * kElem + lane_k;
    else if (UP)
      b_row[nt] = s.xq + pair * p.hidden + lane_k;
    else
      b_row[nt] = static_cast<const uint8_t*>(s.h) + pair * p.inter * kElem + lane_k;
  }

  float acc[2][NT][4] = {};
  // nk: this warp's k-blocks; its i-th is k-block k_first + i kSplit of the row.
  const int nk_row = static_cast<int>((kbytes + kKBlock - 1) / kKBlock);
  const int nk = nk_row > k_first ? (nk_row - k_first + kSplit - 1) / kSplit : 0;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load_b = [&](uint4(&b)[NT], int kb) {
    const int64_t off = static_cast<int64_t>(k_first + kb * kSplit) * kKBlock;
    const bool in = off + lane_k < kbytes;  // k tail (K * elem is a multiple of 16)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      b[nt] = in ? __ldg(reinterpret_cast<const uint4*>(b_row[nt] + off)) : zero;
  };
  // Lane l's 16 bytes of row r (0..3 = grp, grp + 8, grp + 16, grp + 24) of a stage sit at
  // r * 512 + 16 l: each lane reads back only what it copied (no warp synchronization), and
  // consecutive lanes hit consecutive banks.
  uint8_t* mine = ring + 16 * lane;
  auto issue = [&](int kb) {  // always commits one group (empty past the end)
    const int64_t off = static_cast<int64_t>(k_first + kb * kSplit) * kKBlock;
    const bool in = off + lane_k < kbytes;
    uint8_t* dst = mine + (kb % kStages) * kStageBytes;
#pragma unroll
    for (int r = 0; r < 4; ++r)
      cp_async16<kL2>(dst + r * 512, in ? a_row[r >> 1][r & 1] + off : W, in ? 16 : 0);
    cp_async_commit();
  };
  constexpr int DB = b_depth(NT);
  uint4 rb[DB][NT];
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st)
    issue(st);
#pragma unroll
  for (int j = 0; j < DB - 1; ++j)
    load_b(rb[j], j);
  for (int kb0 = 0; kb0 < nk; kb0 += DB) {
#pragma unroll
    for (int j = 0; j < DB; ++j) {
      const int kb = kb0 + j;
      load_b(rb[(j + DB - 1) % DB], kb + DB - 1);
      if (kb < nk) {
        cp_async_wait<kStages - 2>();  // this lane's copies of k-block kb have landed
        const uint8_t* src = mine + (kb % kStages) * kStageBytes;
        uint4 a[2][2];
#pragma unroll
        for (int r = 0; r < 4; ++r)
          a[r >> 1][r & 1] = *reinterpret_cast<const uint4*>(src + r * 512);
        issue(kb + kStages - 1);  // into the stage read at kb - 1
        kblock_mma<FP8, NT, V>(acc, a, rb[j]);
      }
    }
  }
  cp_async_wait<0>();

  if constexpr (kSplit > 1) {
    // The other warps of the group store their sums, lane-fastest (no bank conflicts), in slot
    // `warp` over the block's rings; the group's first warp adds them.
    constexpr int kAcc = 2 * NT * 4;
    float* red = reinterpret_cast<float*>(smem);  // [kWarps][kAcc][32]
    const int warp = static_cast<int>(threadIdx.x >> 5);
    __syncthreads();  // every warp is done with its ring
    if (k_first > 0) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i)
        red[(warp * kAcc + i) * 32 + lane] = acc[i / (NT * 4)][(i / 4) % NT][i % 4];
    }
    __syncthreads();
    if (k_first > 0) return;
#pragma unroll
    for (int w = 1; w < kSplit; ++w)
#pragma unroll
      for (int i = 0; i < kAcc; ++i)
        acc[i / (NT * 4)][(i / 4) % NT][i % 4] += red[((warp + w) * kAcc + i) * 32 + lane];
  }

  // c0, c1: feature grp, pairs 2 tig, 2 tig + 1 of the n8 tile; c2, c3: feature grp + 8.
  // The integer spread gives each operand x 2^-8 (the scale carries 2^16), cvt exact values.
  const float scale =
      (UP ? up_scale(p, e) : down_scale(p, e)) * (FP8 && (V & kSwapCvt) == 0 ? 65536.f : 1.f);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int n = nt * 8 + 2 * tig + c;
      if (n >= rows) continue;
      const int64_t pair = s.sorted[row0 + n];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t f = fw + mt * 16 + grp + 8 * h;
          if (f >= F) continue;
          const float v = acc[mt][nt][2 * h + c] * scale;
          if (UP)
            store_hidden<bf16>(p, s, e, pair, f, v);
          else
            static_cast<bf16*>(s.d)[pair * p.hidden + f] = __float2bfloat16_rn(v);
        }
      }
    }
  }
}

// grid (2 max_tiles, ceil(F / block_features(V))), kThreads threads, kSmemBytes of dynamic shared
// memory: block (2 t + half, y) takes pairs 32 half .. 32 half + 31 of tile t (NT <= 4 keeps the
// registers within three blocks per multiprocessor, four staged; the two halves of a full tile run
// as neighbouring blocks, so the second read of the weights mostly hits L2), and its warp w
// features 128 y + 32 w .. + 31; with kSwapSplitK, warps 2 g and 2 g + 1 features 64 y + 32 g ..
// + 31, each half of the k-blocks (2x the blocks, each half the work: finer waves where few
// tiles cover the GPU once or twice, as at a batched decode step).
template <int V>
constexpr int block_features() {
  return kBlockF / split_of<V>();
}

template <bool FP8, bool UP, int V>
__global__ void __launch_bounds__(kThreads, 4) grouped_swap_kernel(MoeExpertsLaunch p, Scratch s) {
  extern __shared__ __align__(16) uint8_t smem[];
  pdl_enter();  // the tile table and the activations come from the kernels before
  const int tile = blockIdx.x >> 1, half = blockIdx.x & 1;
  const int e = s.tiles[2 * tile];
  if (e < 0) return;
  const int32_t row0 = s.tiles[2 * tile + 1] + kHalfTile * half;
  const int rows = min(kHalfTile, s.offsets[e] + s.counts[e] - row0);
  if (rows <= 0) return;
  const int64_t F = UP ? p.inter : p.hidden;
  const int warp = threadIdx.x >> 5;
  const int64_t fw =
      static_cast<int64_t>(blockIdx.y) * block_features<V>() + (warp / split_of<V>()) * kWarpF;
  // Split warps synchronize: the block returns only as a whole (a group past F computes clamped
  // rows and stores nothing).
  if (split_of<V>() > 1 ? static_cast<int64_t>(blockIdx.y) * block_features<V>() >= F : fw >= F)
    return;
  uint8_t* ring = smem + warp * kStages * kStageBytes;
  switch ((rows + 7) / 8) {
    case 1:
      warp_tile<FP8, UP, 1, V>(p, s, e, row0, rows, fw, ring, smem);
      break;
    case 2:
      warp_tile<FP8, UP, 2, V>(p, s, e, row0, rows, fw, ring, smem);
      break;
    case 3:
      warp_tile<FP8, UP, 3, V>(p, s, e, row0, rows, fw, ring, smem);
      break;
    default:
      warp_tile<FP8, UP, 4, V>(p, s, e, row0, rows, fw, ring, smem);
      break;
  }
}

template <bool FP8, bool UP, int V>
void launch_one(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [] {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(
        grouped_swap_kernel<FP8, UP, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    // Four blocks per multiprocessor need 4 x 48 KB of the unified L1 as shared memory.
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_swap_kernel<FP8, UP, V>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t F = UP ? p.inter : p.hidden;
  const dim3 grid(static_cast<unsigned>(2 * max_tiles),
                  static_cast<unsigned>((F + block_features<V>() - 1) / block_features<V>()));
  launch_pdl(grouped_swap_kernel<FP8, UP, V>, grid, dim3(kThreads), kSmemBytes, stream, p, s);
  STRATA_CUDA_LAUNCH_CHECK();
}

template <int V>
void launch_variant(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                    cudaStream_t stream) {
  if (p.w8a8) {
    launch_one<true, true, V>(p, s, max_tiles, stream);
    launch_one<true, false, V>(p, s, max_tiles, stream);
  } else {  // bf16: no conversion, only the prefetch and split flags matter
    constexpr int kBf16 = V & (kSwapL2Prefetch | kSwapSplitK);
    launch_one<false, true, kBf16>(p, s, max_tiles, stream);
    launch_one<false, false, kBf16>(p, s, max_tiles, stream);
  }
}

}  // namespace

void launch_grouped_swap(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                         cudaStream_t stream) {
  if (p.swap_variant == kSwapL2CvtSplit)
    launch_variant<kSwapL2CvtSplit>(p, s, max_tiles, stream);
  else if (p.swap_variant == kSwapL2Cvt)
    launch_variant<kSwapL2Cvt>(p, s, max_tiles, stream);
  else if (p.swap_variant == 0)
    launch_variant<0>(p, s, max_tiles, stream);
  else
    STRATA_CUDA_FAIL("moe grouped_swap: unknown variant (registered in moe_kernels.cpp)");
}

}  // namespace strata::cuda::moe
