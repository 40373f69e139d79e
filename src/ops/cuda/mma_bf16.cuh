// Warp-level bf16 tensor-core products: mma.sync m16n8k16 (bf16 x bf16 -> f32 accumulate) and
// fragment loads from shared memory. Fragment layouts (PTX ISA, "Matrix Fragments for
// mma.m16n8k16" with .bf16), lane = 4 * grp + tig:
//   A (16 x 16, row-major):  a[0] = A[grp][2 tig, +1]      a[1] = A[grp + 8][2 tig, +1]
//                            a[2] = A[grp][2 tig + 8, +9]  a[3] = A[grp + 8][2 tig + 8, +9]
//   B (16 x 8, K x N):       b[0] = B[2 tig, +1][grp]      b[1] = B[2 tig + 8, +9][grp]
//   C (16 x 8, f32):         c[0], c[1] = C[grp][2 tig, +1]  c[2], c[3] = C[grp + 8][2 tig, +1]
// Each 32-bit register holds two bf16, the lower k in the low half. Both loaders read pairs of
// consecutive k from a tile stored k-contiguous (row stride `ld` elements, even), so A is
// stored [m][k] and B is stored [n][k].
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace strata::cuda::mma {

struct Lane {
  int grp, tig;  // lane / 4, lane % 4
  __device__ explicit Lane(int lane) : grp(lane >> 2), tig(lane & 3) {}
};

__device__ __forceinline__ uint32_t ld_pair(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Two f32 -> one register of two bf16 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A fragment of rows [m0, m0 + 16), k [k0, k0 + 16) of a tile stored [m][k].
__device__ __forceinline__ void load_a(uint32_t a[4], const __nv_bfloat16* tile, int ld, int m0,
                                       int k0, Lane ln) {
  const __nv_bfloat16* r0 = tile + (m0 + ln.grp) * ld + k0 + 2 * ln.tig;
  const __nv_bfloat16* r1 = r0 + 8 * ld;
  a[0] = ld_pair(r0);
  a[1] = ld_pair(r1);
  a[2] = ld_pair(r0 + 8);
  a[3] = ld_pair(r1 + 8);
}

// B fragment of columns [n0, n0 + 8), k [k0, k0 + 16) of a tile stored [n][k].
__device__ __forceinline__ void load_b(uint32_t b[2], const __nv_bfloat16* tile, int ld, int n0,
                                       int k0, Lane ln) {
  const __nv_bfloat16* r = tile + (n0 + ln.grp) * ld + k0 + 2 * ln.tig;
  b[0] = ld_pair(r);
  b[1] = ld_pair(r + 8);
}

// 8 x 8 bf16 matrices from shared memory (ldmatrix): lane i gives the address of row i % 8 of
// matrix i / 8 (x2: lanes 0-15); register j holds matrix j, thread t its elements (t / 4,
// 2 (t % 4) and + 1), of the matrix as stored or (_trans) transposed. One instruction where the
// loaders above issue four 32-bit shared loads.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], const __nv_bfloat16* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// c += A . B for one 16 x 8 x 16 tile.
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace strata::cuda::mma
