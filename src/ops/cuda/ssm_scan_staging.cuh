// Global -> shared staging of the tensor-core scan's bf16 operands (ssm_scan_mma.cu): tiles are
// staged as they lie in memory ([token][column]) and read transposed where the product needs it
// (ldmatrix .trans). Views whose first element and row stride keep every group of 8 elements
// 16-byte aligned (the model's x, B, C column ranges and the scan's own scratch) are copied by
// 16-byte cp.async copies, all in flight at once, each thread on a fixed 16-byte column (no
// division per element); other views (the op harness's odd offsets) take a scalar path. Zero
// fill past `valid` is the same on both paths.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace strata::cuda::scan {

namespace {

using sbf16 = __nv_bfloat16;

__device__ __forceinline__ bool aligned16(const void* p, int64_t ld) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0 && (ld & 7) == 0;
}

// A thread's fixed place in a [rows][V groups of 8] sweep: group v, first row r0, row step.
// Threads past step * V idle (when V does not divide the block).
struct Sweep {
  int v, r0, step;
  __device__ explicit Sweep(int V) {
    const int t = static_cast<int>(threadIdx.x);
    r0 = t / V;
    v = t - r0 * V;
    step = static_cast<int>(blockDim.x) / V;
    if (r0 >= step) r0 = 1 << 30;  // idle
  }
};

__device__ __forceinline__ void cp_async16(sbf16* smem, const sbf16* gmem, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: zero fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
// Waits until at most `kPending` of this thread's newest commit groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// tile[r][k] = src[(t0 + r) * ld + col0 + k] for r < valid, 0 for valid <= r < rows; k < width.
// The copies are left in flight on the 16-byte path (width a multiple of 8, tile rows 16-byte
// aligned): the caller commits, waits with cp_async_wait_all and synchronizes the block before
// reading the tile; the scalar path stores synchronously (the same wait and barrier cover it).
__device__ __forceinline__ void load_rows_async(sbf16* tile, int ldt, const sbf16* src, int64_t ld,
                                                int64_t t0, int valid, int rows, int64_t col0,
                                                int width) {
  const sbf16* base = src + t0 * ld + col0;
  if (aligned16(base, ld) && (width & 7) == 0 && (ldt & 7) == 0) {
    const Sweep sw(width / 8);
    for (int r = sw.r0; r < rows; r += sw.step)
      cp_async16(tile + r * ldt + 8 * sw.v, r < valid ? base + r * ld + 8 * sw.v : base,
                 r < valid);
    return;
  }
  const int total = rows * width;
#pragma unroll 4
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int r = e / width, k = e - r * width;
    tile[r * ldt + k] = r < valid ? base[r * ld + k] : __float2bfloat16_rn(0.f);
  }
}

}  // namespace
}  // namespace strata::cuda::scan
