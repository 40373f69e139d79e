// The FP8 decode GEMV core with the weights streamed through shared memory (cp.async), used by
// linear cuda.fp8_stream and moe_experts cuda.fp8_stream. Same arithmetic as the register core
// of linear_fp8_mma.cuh (its fragment layout, mma_batch and tile_sum are reused); only the way
// the weight tile reaches the A fragments differs.
//
// Why: the register core loads the A fragments straight from global memory, so one 16-byte load
// instruction covers 64 bytes of each of 8 rows and a lane can keep only 2 x 4 loads in flight
// (registers); it measured 33-60% of the H200's read ceiling. Here the block's weight tile
// (R rows x K bytes, R = 16 or 8) is cut into slices of 512 bytes per row; a warp copies one row
// of a slice with one cp.async instruction (32 lanes x 16 contiguous bytes: four whole 128-byte
// lines), and kSlots slices live in a ring in shared memory, kSlots - 1 of them in flight while
// one is multiplied: 24 KB in flight per block at R = 16 (28 KB at R = 8), with 4 blocks per
// multiprocessor ~100 KB, without holding registers. Warp w multiplies chunk w (64 bytes per
// row) of every slice, reading its fragments from shared memory.
//
// Shared-memory layout of a slot: [R rows][512 bytes], 16-byte unit j of row r stored at unit
// j ^ 4 (r & 1). A quarter-warp's 16-byte fragment reads cover units 4w..4w+3 of rows g and
// g + 1; the row stride is 512 (= 0 mod 128 bytes), so without the swizzle both rows would hit
// the same 16 banks; with it they take the two halves of the 32 banks. The copies stay
// conflict-free: the swizzle permutes units inside each 128-byte group.
//
// R = 8 halves the bytes per block (the mma's rows 8..15 are zeros) so that layers with few
// 16-row tiles fill the multiprocessors (rows_for_grid).
#pragma once

#include "ops/cuda/linear_fp8_mma.cuh"

namespace strata::cuda::fp8 {

constexpr int kSliceBytes = 512;                    // bytes per row per slice (8 chunks of 64)
constexpr int kSliceChunks = kSliceBytes / kChunk;  // = kWarps: one chunk per warp
constexpr int kRingBytes = 32 * 1024;               // the slot ring, whatever R
constexpr int kStreamMinBlocks = 4;                 // blocks per multiprocessor, one N tile
static_assert(kSliceChunks == kWarps, "a slice gives every warp one chunk");

// Blocks per multiprocessor the streamed kernels ask the register allocator for: 4 with one N
// tile (64 registers; the ring holds the loads), 2 with two (the bf16 B fragments of 16 tokens).
constexpr int stream_min_blocks(int NT) {
  return NT == 1 ? kStreamMinBlocks : 2;
}

template <int R>
constexpr int ring_slots() {
  return kRingBytes / (R * kSliceBytes);  // R = 16: 4 slots, R = 8: 8 slots
}

// 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros (nothing is read).
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

__device__ __forceinline__ int swizzled_unit(int row, int unit) {
  return unit ^ ((row & 1) << 2);
}

// The weight tile a block streams: `rows` valid rows (<= R) of K bytes from w (16-byte aligned,
// K % 16 == 0).
struct StreamTile {
  const uint8_t* w;
  int rows;
  int64_t K;
};

__device__ __forceinline__ int slices_of(int64_t K) {
  return static_cast<int>((K + kSliceBytes - 1) / kSliceBytes);
}

// Issues the copies of slice s into `slot` (R x 512 bytes): thread i copies unit i % 32 of row
// i / 32 (and of row i / 32 + 8 when R = 16), zeros past K and past the valid rows.
template <int R>
__device__ __forceinline__ void issue_slice(const StreamTile& t, int s, uint8_t* slot) {
  static_assert(R * 32 % kThreads == 0 && R * 32 / kThreads >= 1, "whole copies per thread");
  const int unit = threadIdx.x & 31;
  const int64_t k = static_cast<int64_t>(s) * kSliceBytes + 16 * unit;
#pragma unroll
  for (int i = 0; i < R * 32 / kThreads; ++i) {
    const int r = static_cast<int>(threadIdx.x >> 5) + i * kWarps;
    const bool in = r < t.rows && k < t.K;
    const uint8_t* src = in ? t.w + r * t.K + k : t.w;
    cp_async16(slot + r * kSliceBytes + 16 * swizzled_unit(r, unit), src, in ? 16 : 0);
  }
}

// Starts the stream: the first kSlots - 1 slices in flight (one commit group each, empty past
// the last slice). Call before staging the B operand, so the two overlap.
template <int R>
__device__ __forceinline__ void stream_start(const StreamTile& t, uint8_t* ring) {
  constexpr int kSlots = ring_slots<R>();
  const int n = slices_of(t.K);
#pragma unroll
  for (int s = 0; s < kSlots - 1; ++s) {
    if (s < n) issue_slice<R>(t, s, ring + s * R * kSliceBytes);
    cp_async_commit();
  }
}

// Multiplies the streamed tile with the staged tokens (xs, row stride `stride`, M tokens; staged
// by every thread after stream_start and not yet synchronized): acc[nt] gets the mma accumulator
// layout of mma_batch. Every thread of the block must call it.
template <BKind B, int NT, int R>
__device__ __forceinline__ void stream_dot(const StreamTile& t, uint8_t* ring, const uint8_t* xs,
                                           int64_t stride, int M, float (&acc)[NT][4]) {
  constexpr int kSlots = ring_slots<R>();
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, warp = threadIdx.x >> 5;
  const int n = slices_of(t.K), chunks = static_cast<int>(padded_k(t.K) / kChunk);
  const int unit = 4 * warp + q;  // the lane's 16 bytes of chunk `warp` (row g, row g + 8)
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[nt][i] = 0.f;
  for (int s = 0; s < n; ++s) {
    cp_async_wait<kSlots - 2>();  // this thread's copies of slice s have landed
    __syncthreads();              // everyone's (and xs, and slot s - 1 is free again)
    const int next = s + kSlots - 1;
    if (next < n) issue_slice<R>(t, next, ring + (next % kSlots) * R * kSliceBytes);
    cp_async_commit();
    const int c = s * kSliceChunks + warp;  // the warp's chunk of padded K
    if (c >= chunks) continue;              // warp-uniform: past K
    const uint8_t* slot = ring + (s % kSlots) * R * kSliceBytes;
    uint4 alo[1], ahi[1];
    alo[0] = *reinterpret_cast<const uint4*>(slot + g * kSliceBytes + 16 * swizzled_unit(g, unit));
    ahi[0] = R == 16 ? *reinterpret_cast<const uint4*>(slot + (g + 8) * kSliceBytes +
                                                       16 * swizzled_unit(g + 8, unit))
                     : zero;
    mma_batch<B, NT, 1>(alo, ahi, c, chunks, xs, stride, M, acc);
  }
}

// Rows per block for a grid of `tiles16` 16-row tiles (times `pairs` blocks each): 8 when
// halving the tiles fills the multiprocessors' block slots better (fewer idle slots in the
// last wave), else 16. slots = multiprocessors x kStreamMinBlocks.
inline int rows_for_grid(int64_t tiles16, int64_t rows_total, int64_t pairs, int64_t slots) {
  auto fill = [&](int64_t blocks) {
    const int64_t waves = (blocks + slots - 1) / slots;
    return static_cast<double>(blocks) / static_cast<double>(waves * slots);
  };
  const int64_t b16 = tiles16 * pairs, b8 = (rows_total + 7) / 8 * pairs;
  return fill(b8) > fill(b16) + 0.02 ? 8 : 16;
}

// Block slots of the current device for the streamed kernels (multiprocessors x
// kStreamMinBlocks), queried once per device.
inline int64_t stream_block_slots() {
  static std::atomic<int64_t> cached[64] = {};
  int device = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  std::atomic<int64_t>& c = cached[device & 63];
  int64_t v = c.load(std::memory_order_acquire);
  if (v > 0) return v;
  int sms = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  v = static_cast<int64_t>(sms) * kStreamMinBlocks;
  c.store(v, std::memory_order_release);
  return v;
}

// Dynamic shared memory of a streamed block: the ring, then the staged B operand.
inline size_t stream_smem(int64_t stage_bytes) {
  return static_cast<size_t>(kRingBytes + stage_bytes);
}

// Like fit_smem, for the streamed kernels' larger dynamic shared memory (ring + stage).
template <auto Kernel>
void fit_stream_smem(size_t dynamic, size_t static_bytes) {
  if (dynamic + static_bytes <= 48 * 1024) return;
  static std::atomic<uint64_t> raised{0};
  int device = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (raised.load(std::memory_order_acquire) & bit) return;
  STRATA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(stream_smem(kMaxStageBytes))));
  raised.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace strata::cuda::fp8
