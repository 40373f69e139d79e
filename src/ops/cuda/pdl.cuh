// Programmatic dependent launch (PDL, sm_90). A kernel launched by launch_pdl may be scheduled
// while the kernel before it in the stream is still running, instead of after it has finished
// and its launch has been processed: at batch 1-8 decode a step is ~400 small dependent kernels,
// and the gap between two of them is a visible part of each one's time.
//
// The contract, for every kernel launched this way: its first statement is pdl_enter(), which
//   - lets the kernel after it be scheduled early too (griddepcontrol.launch_dependents), and
//   - waits until the kernel before it has completed and its writes are visible
//     (griddepcontrol.wait), before this kernel reads or writes any global memory.
// So no access moves before its dependency: what is overlapped is the launch and scheduling of
// the blocks, never their memory traffic. One exception, spelled out where it is made: a GEMV
// may issue its first weight loads between pdl_trigger() and pdl_wait(), since no kernel writes
// the weights of a loaded model (they are read-only for the process's lifetime), so the weight
// stream starts while the kernel before it finishes. A second one: the per-sequence SSD scan
// (ssm_scan_seq.cu) issues its first tile loads before pdl_wait() on steps where the kernel
// before it, table_dt_rows_kernel, was launched to wait for its own predecessors BEFORE it
// triggers (pdl_wait then pdl_trigger): the scan then starts only after every kernel that wrote
// those tiles has completed, and reads nothing the table kernel writes before its own pdl_wait.
// A kernel launched without the attribute
// (cuBLASLt's, a plain <<<>>> launch, a graph's first node) waits as usual; pdl_enter() is then a
// no-op. STRATA_PDL=0 launches every one of them plainly (for A/B runs).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

#include "ops/cuda/cuda_check.h"

namespace strata::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_enter() {
  pdl_trigger();
  pdl_wait();
}

inline bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_PDL");
    return !(e && e[0] == '0');
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization allowed.
template <class... KernelArgs, class... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  STRATA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KernelArgs>(args)...));
}

}  // namespace strata::cuda
