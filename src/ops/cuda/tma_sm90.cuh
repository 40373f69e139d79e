// Tensor-memory-accelerator (TMA) tile loads on sm_90a and the 128-byte-swizzled shared layout
// they write, which wgmma reads directly (what CUTLASS calls the SW128 K-major GMMA layout).
// Only what the SSD scan needs (ssm_scan_wg.cu): bf16 tiles of [rows][64] elements (one 128-byte
// "atom" column), loaded by one thread with one instruction and waited for on an mbarrier.
//
// The layout: row r of an atom is 128 bytes at r * 128; its eight 16-byte pieces are permuted,
// piece j stored at j ^ (r % 8). An atom must start 1024-byte aligned (the pattern repeats every
// 8 rows). Host side: tma_map.h encodes the tensor map the loads take.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace strata::cuda::tma {

// Byte offset of the 16-byte piece holding columns [8 j, 8 j + 8) of row r in a swizzled atom.
__device__ __forceinline__ uint32_t sw128_piece(int r, int j) {
  return static_cast<uint32_t>(r * 128 + ((j ^ (r & 7)) << 4));
}

// wgmma descriptor of a K-major SW128 operand: rows from `row0` (a multiple of 8), the 16
// K-columns from `k0` (a multiple of 16, below 64) of the atom at `atom` (1024-byte aligned).
// LBO is unused for a swizzled K-major operand whose K step (32 bytes) lies inside the atom;
// SBO = 1024 bytes (the next 8 rows); layout type 1 = 128-byte swizzle (bits 62-63). The start
// moves by the K offset unswizzled: the hardware applies the XOR from the address bits, as the
// TMA did when it wrote the atom.
__device__ __forceinline__ uint64_t desc_sw128(const void* atom, int row0, int k0) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(atom)) + row0 * 128 + k0 * 2;
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// wgmma descriptor of an MN-major SW128 operand of 64 MN-columns (one atom wide): K-rows from
// `row0` (a multiple of 8) of the atom at `atom` (1024-byte aligned), each row the 64 MN-values
// in 128 bytes. SBO = 1024 bytes (the next 8 K-rows); LBO (the next atom along MN) is unused at
// 64 columns; layout type 1 = 128-byte swizzle. CUTLASS's canonical MN-major SW128 form
// ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements.
__device__ __forceinline__ uint64_t desc_sw128_mn(const void* atom, int row0) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(atom)) + row0 * 128;
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One-phase mbarrier: init (one arrival expected), then arrive with the bytes the loads will
// deliver; the phase completes when the arrival and every byte have landed.
__device__ __forceinline__ void bar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
  // The init must be visible to the async proxy before a load signals the barrier.
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void bar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(phase)
      : "memory");
}

// dst[0, bytes) = src[0, bytes): one bulk copy (16-byte aligned addresses, bytes % 16 == 0).
__device__ __forceinline__ void load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// tile = the box of `map` at (column c0, row r0); rows past the tensor arrive as zeros.
__device__ __forceinline__ void load_2d(void* tile, const CUtensorMap* map, int c0, int r0,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(tile)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(r0), "r"(smem_u32(bar))
      : "memory");
}

// The box of `map` at (column c0, row r0) = tile, by the async proxy (the caller fenced its
// generic writes to the tile and synchronized the threads that made them); rows and columns past
// the tensor are not written. Committed as one bulk group; wait_store_read() before the tile is
// written again.
__device__ __forceinline__ void store_2d(const CUtensorMap* map, int c0, int r0, const void* tile) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
      "cp.async.bulk.commit_group;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(r0), "r"(smem_u32(tile))
      : "memory");
}
// Every bulk store this thread committed has read its shared-memory source.
__device__ __forceinline__ void wait_store_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

}  // namespace strata::cuda::tma
