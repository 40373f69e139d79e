// Thread-block clusters on sm_90: the block's rank, another block's shared memory (distributed
// shared memory), the cluster barrier, and asynchronous stores into another block's shared
// memory that signal its mbarrier (tma_sm90.cuh's barriers) with the bytes they deliver.
// Used by the per-sequence SSD scan (ssm_scan_seq.cu) to hand a chunk's state to the block that
// takes the next chunk.
#pragma once

#include <cstdint>

#include "ops/cuda/tma_sm90.cuh"

namespace strata::cuda::dsmem {

__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t size() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// The shared address of `p` (this block's) in block `r` of the cluster.
__device__ __forceinline__ uint32_t map(const void* p, uint32_t r) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(d) : "r"(tma::smem_u32(p)), "r"(r));
  return d;
}
// Every thread of every block of the cluster; orders earlier shared-memory writes (mbarrier
// inits among them) before any block's later accesses.
__device__ __forceinline__ void sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
// 16 bytes into another block's shared memory at `dst` (a cluster address from map), counted
// as delivered bytes on its mbarrier at `bar` (also a cluster address).
__device__ __forceinline__ void store_async(uint32_t dst, float4 v, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(dst),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
      : "memory");
}

}  // namespace strata::cuda::dsmem
