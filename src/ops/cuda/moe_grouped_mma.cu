// The routed experts' grouped GEMMs on the tensor cores (mma.sync bf16), for many tokens.
//
// The pairs are already bucketed by expert (moe_experts.cu: count, plan, scatter on the device)
// and cut into tiles of up to 64 sorted rows of one expert. One launch does the up projection
// of every tile, one the down projection:
//   up:   C[r][f] = A[r] . W_up[e][f],   A[r] = x[token] (bf16) or xq[pair] (e4m3, W8A8)
//         epilogue h = act(relu(act(C * su))^2), stored act or quantized with down_in (W8A8)
//   down: C[r][n] = h[pair] . W_down[e][n], epilogue d[pair][n] = act(C * sd)
// A block computes a 64 x 128 output tile (rows x features): 8 warps as 2 x 4, each 32 x 32
// (2 m16 x 4 n8 mma tiles). K runs in stages of 128 bytes per row (64 bf16 or 128 e4m3 values),
// copied global -> shared with cp.async, three stages deep, so the weight stream (the cost
// when an expert has few tokens) keeps two stages in flight while the third is multiplied.
// Rows past the tile's pairs, features past F and k past K are zero-filled by the copies.
//
// Products: mma.sync m16n8k16 bf16 -> f32. Fragments (PTX ISA), lane = 4 grp + tig: A's
// registers are the 4 bytes at byte offsets 4 tig and 16 + 4 tig of rows grp and grp + 8 of a
// 32-byte k step, B's the same byte offsets of feature row grp (W is stored [feature][k], which
// is mma's col-major B). Shared rows are 144 bytes apart (36 words): the 8 row groups x 4 tig of
// a fragment load hit 32 distinct banks.
//
// e4m3 (W8A8), two variants picked by the token count (kConvertFromTokens), both measured on the
// H200: below it, mma.sync m16n8k32 e4m3 on the staged bytes, each stage's four k steps summed
// into a zeroed partial then added to the f32 accumulators (Hopper's e4m3 path keeps a short
// running sum); from it, each half stage converted once, exactly (e4m3 values are bf16 values),
// into a bf16 tile for the bf16 mmas. (Why the e4m3 mma loses on full tiles was not seen in the
// SASS; the likely reason is that sm_90 has no native e4m3 mma.sync and ptxas converts per
// fragment. The commit that added the conversion claimed that as fact; it was a guess.)
// Both are bound by the L1/shared-memory pipe (ncu: ~75% L1 throughput, DRAM ~30% at 512
// tokens), not by DRAM: see docs/BENCHMARKS.md for the next steps.
#include "ops/cuda/moe_common.cuh"

namespace strata::cuda::moe {

namespace {

constexpr int kBM = kTile;                      // rows (sorted pairs) per block
constexpr int kBN = 128;                        // output features per block
constexpr int kStageK = 128;                    // bytes of k per row per stage
constexpr int kLd = kStageK + 16;               // shared row stride (bytes)
constexpr int kStages = 3;                      // cp.async pipeline depth
constexpr int kThreads = 256;                   // 8 warps: 2 (rows) x 4 (features)
constexpr int kStageBytes = (kBM + kBN) * kLd;  // A rows then W rows
// The converting FP8 kernel adds one bf16 tile of half a stage (64 values per row: 128 bytes,
// same stride).
constexpr int smem_bytes(bool conv) {
  return kStages * kStageBytes + (conv ? kStageBytes : 0);
}

// Tokens from which the e4m3 GEMMs convert to bf16 tiles (W8A8). Measured on the H200 (MoE op
// per Nano-3 layer, docs/BENCHMARKS.md): e4m3 mma 697 / 998 / 2310 / 7912 us and converted bf16
// 858 / 1041 / 2202 / 7298 us at 128 / 512 / 2048 / 8192 tokens.
constexpr int64_t kConvertFromTokens = 1024;

// 16 bytes global -> shared, L1 bypassed; src_bytes 0 writes zeros and reads nothing.
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

__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// c += A . B (16 x 16 bf16 times 16 x 8 bf16).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += A . B (16 x 32 e4m3 times 32 x 8 e4m3).
__device__ __forceinline__ void mma_e4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four e4m3 codes (byte i = value i) -> bf16x2 words (values 0, 1) and (2, 3), exactly: the
// exponent and mantissa fields move into bf16's with the bias 120 short, which one exact multiply
// by 2^120 restores (subnormals become normals on the way). As linear_fp8_mma.cuh.
__device__ __forceinline__ void e4m3x4_to_bf16x4(uint32_t v, uint32_t& w01, uint32_t& w23) {
  const uint32_t t01 = __byte_perm(v, 0u, 0x1404);  // b1 << 24 | b0 << 8
  const uint32_t t23 = __byte_perm(v, 0u, 0x3424);  // b3 << 24 | b2 << 8
  const uint32_t m01 = ((t01 >> 4) & 0x07f007f0u) | (t01 & 0x80008000u);
  const uint32_t m23 = ((t23 >> 4) & 0x07f007f0u) | (t23 & 0x80008000u);
  constexpr uint32_t kTwo120 = 0x7b807b80u;  // bf16x2 (2^120, 2^120)
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(w01) : "r"(m01), "r"(kTwo120));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(w23) : "r"(m23), "r"(kTwo120));
}

// grid (max_tiles, ceil(F / 128)), kThreads threads, smem_bytes(CONV) of dynamic shared memory.
// FP8: e4m3 A and W (W8A8), else bf16 A and W. FP8 && CONV: converted to bf16 tiles (many
// tokens); FP8 && !CONV: e4m3 mma.sync (few tokens).
template <bool FP8, bool UP, bool CONV>
__global__ void __launch_bounds__(kThreads, 2) grouped_mma_kernel(MoeExpertsLaunch p, Scratch s) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int e = s.tiles[2 * blockIdx.x];
  if (e < 0) return;
  const int32_t row0 = s.tiles[2 * blockIdx.x + 1];
  const int rows = min(kBM, s.offsets[e] + s.counts[e] - row0);
  constexpr int64_t kElem = FP8 ? 1 : 2;
  const int64_t K = UP ? p.hidden : p.inter, F = UP ? p.inter : p.hidden;
  const int64_t kbytes = K * kElem;
  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const uint8_t* W = static_cast<const uint8_t*>(UP ? p.tables.up[e] : p.tables.down[e]);

  // Copy assignment: 8 units of 16 bytes per row and stage; thread -> unit tid % 8 of rows
  // tid / 8 + 32 m (A: m < 2, W: m < 4). nullptr: a zero row.
  const int unit = threadIdx.x & 7, lrow = threadIdx.x >> 3;
  const uint8_t* a_src[2];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int r = lrow + 32 * m;
    a_src[m] = nullptr;
    if (r < rows) {
      const int64_t pair = s.sorted[row0 + r];
      if (UP && !FP8)
        a_src[m] = static_cast<const uint8_t*>(p.x.p) + (pair / p.top_k) * p.x.ld * kElem;
      else if (UP)
        a_src[m] = s.xq + pair * p.hidden;
      else
        a_src[m] = static_cast<const uint8_t*>(s.h) + pair * p.inter * kElem;
    }
  }
  const uint8_t* w_src[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int64_t f = f0 + lrow + 32 * m;
    w_src[m] = f < F ? W + f * kbytes : nullptr;
  }
  auto load_stage = [&](int stage, int64_t kt) {
    uint8_t* sa = smem + stage * kStageBytes;
    uint8_t* sw = sa + kBM * kLd;
    const int64_t kb = kt * kStageK + unit * 16;
    const bool kin = kb < kbytes;
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const bool in = kin && a_src[m] != nullptr;
      cp_async16(sa + (lrow + 32 * m) * kLd + unit * 16, in ? a_src[m] + kb : W, in ? 16 : 0);
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const bool in = kin && w_src[m] != nullptr;
      cp_async16(sw + (lrow + 32 * m) * kLd + unit * 16, in ? w_src[m] + kb : W, in ? 16 : 0);
    }
  };

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int grp = lane >> 2, tig = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;  // warp tile: rows 32 wm.., features 32 wn..
  // m16 tiles holding at least one of the tile's rows (warp-uniform).
  const bool mt_live[2] = {wm * 32 < rows, wm * 32 + 16 < rows};

  float acc[2][4][4] = {};
  // 32 bytes of k per row of a bf16 tile (16 values): one k16 mma step for every fragment.
  auto mma_steps = [&](const uint8_t* sa, const uint8_t* sw, int steps) {
#pragma unroll
    for (int ks = 0; ks < steps; ++ks) {
      const int kb = ks * 32 + 4 * tig;
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const uint8_t* r0 = sa + (wm * 32 + mt * 16 + grp) * kLd + kb;
        a[mt][0] = ld32(r0);
        a[mt][1] = ld32(r0 + 8 * kLd);
        a[mt][2] = ld32(r0 + 16);
        a[mt][3] = ld32(r0 + 8 * kLd + 16);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const uint8_t* r = sw + (wn * 32 + nt * 8 + grp) * kLd + kb;
        const uint32_t b0 = ld32(r), b1 = ld32(r + 16);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          if (mt_live[mt]) mma_bf16(acc[mt][nt], a[mt], b0, b1);
      }
    }
  };
  const int64_t nk = (kbytes + kStageK - 1) / kStageK;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nk) load_stage(st, st);
    cp_async_commit();
  }
  uint8_t* cvt = smem + kStages * kStageBytes;  // FP8: the bf16 tile of half a stage
  for (int64_t kt = 0; kt < nk; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free for reuse
    if (kt + kStages - 1 < nk)
      load_stage(static_cast<int>((kt + kStages - 1) % kStages), kt + kStages - 1);
    cp_async_commit();
    const uint8_t* sa = smem + (kt % kStages) * kStageBytes;
    if constexpr (FP8 && CONV) {
      // Each half (64 e4m3 values per row) becomes a bf16 tile: 192 rows x 4 units of 16 codes.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (half == 1) __syncthreads();  // the first half's tile is consumed
#pragma unroll
        for (int c = threadIdx.x; c < (kBM + kBN) * 4; c += kThreads) {
          const int row = c >> 2, part = c & 3;
          const uint4 v = *reinterpret_cast<const uint4*>(sa + row * kLd + half * 64 + part * 16);
          uint4 lo, hi;
          e4m3x4_to_bf16x4(v.x, lo.x, lo.y);
          e4m3x4_to_bf16x4(v.y, lo.z, lo.w);
          e4m3x4_to_bf16x4(v.z, hi.x, hi.y);
          e4m3x4_to_bf16x4(v.w, hi.z, hi.w);
          uint8_t* d = cvt + row * kLd + part * 32;
          *reinterpret_cast<uint4*>(d) = lo;
          *reinterpret_cast<uint4*>(d + 16) = hi;
        }
        __syncthreads();  // the bf16 tile is complete
        mma_steps(cvt, cvt + kBM * kLd, kStageK / 2 / 16);
      }
    } else if constexpr (FP8) {
      // e4m3 mma per 32-byte k step; the four of a stage sum into a zeroed partial that is then
      // added to the f32 accumulators (Hopper's e4m3 path keeps a short running sum).
      const uint8_t* sw = sa + kBM * kLd;
      float part[2][4][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            part[mt][nt][i] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kStageK / 32; ++ks) {
        const int kb = ks * 32 + 4 * tig;
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const uint8_t* r0 = sa + (wm * 32 + mt * 16 + grp) * kLd + kb;
          a[mt][0] = ld32(r0);
          a[mt][1] = ld32(r0 + 8 * kLd);
          a[mt][2] = ld32(r0 + 16);
          a[mt][3] = ld32(r0 + 8 * kLd + 16);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const uint8_t* r = sw + (wn * 32 + nt * 8 + grp) * kLd + kb;
          const uint32_t b0 = ld32(r), b1 = ld32(r + 16);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
            if (mt_live[mt]) mma_e4m3(part[mt][nt], a[mt], b0, b1);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[mt][nt][i] += part[mt][nt][i];
    } else {
      mma_steps(sa, sa + kBM * kLd, kStageK / 32);
    }
  }
  cp_async_wait<0>();

  // Epilogue: c[0], c[1] = C[grp][2 tig, +1]; c[2], c[3] = C[grp + 8][2 tig, +1].
  const float scale = UP ? up_scale(p, e) : down_scale(p, e);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 32 + mt * 16 + grp + 8 * half;
      if (r >= rows) continue;
      const int64_t pair = s.sorted[row0 + r];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t f = f0 + wn * 32 + nt * 8 + 2 * tig;  // F is even: f < F covers f + 1
        if (f >= F) continue;
        const float v0 = acc[mt][nt][2 * half] * scale, v1 = acc[mt][nt][2 * half + 1] * scale;
        if (UP) {
          store_hidden<bf16>(p, s, e, pair, f, v0);
          store_hidden<bf16>(p, s, e, pair, f + 1, v1);
        } else {
          *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(s.d) + pair * p.hidden + f) =
              __floats2bfloat162_rn(v0, v1);
        }
      }
    }
  }
}

template <bool FP8, bool UP, bool CONV>
void launch_one(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  once_per_device(configured, [] {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_mma_kernel<FP8, UP, CONV>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_bytes(CONV)));
    // All of the unified L1 as shared memory: two blocks per multiprocessor fit only so.
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(grouped_mma_kernel<FP8, UP, CONV>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
  });
  const int64_t F = UP ? p.inter : p.hidden;
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((F + kBN - 1) / kBN));
  grouped_mma_kernel<FP8, UP, CONV><<<grid, kThreads, smem_bytes(CONV), stream>>>(p, s);
  STRATA_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_grouped_mma(const MoeExpertsLaunch& p, const Scratch& s, int64_t max_tiles,
                        cudaStream_t stream) {
  if (p.w8a8 && p.x.rows >= kConvertFromTokens) {
    launch_one<true, true, true>(p, s, max_tiles, stream);
    launch_one<true, false, true>(p, s, max_tiles, stream);
  } else if (p.w8a8) {
    launch_one<true, true, false>(p, s, max_tiles, stream);
    launch_one<true, false, false>(p, s, max_tiles, stream);
  } else {
    launch_one<false, true, false>(p, s, max_tiles, stream);
    launch_one<false, false, false>(p, s, max_tiles, stream);
  }
}

}  // namespace strata::cuda::moe

namespace strata::cuda {

std::string moe_mma_unsupported(const MoeExpertsLaunch& p) {
  if (p.x.dt != DType::BF16) return "activations are not bf16";
  if (!(p.wt == DType::BF16 || (p.wt == DType::F8E4M3 && p.w8a8)))
    return "expert weights are neither bf16 nor e4m3 with input scales (W8A8)";
  if (p.hidden % 16 != 0 || p.inter % 16 != 0)
    return "H and I must be multiples of 16 (16-byte copies of every row)";
  if (!p.vec_up || !p.vec_down) return "x rows or expert weight rows are not 16-byte aligned";
  return "";
}

}  // namespace strata::cuda
