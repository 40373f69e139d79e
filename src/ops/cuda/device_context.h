// One GPU's device state: its stream, its arena (the allocator of the tensors made while the
// context is current), the counter kernels raise on out-of-range indices, the device's
// properties, and the per-context caches of modules (cuBLASLt's handle, workspace and plans;
// the MoE expert tables). Nothing of it is process-wide: two contexts (two GPUs, or two streams
// on one GPU) run side by side without sharing a buffer, a counter or a cache.
//
// Ops find their context through OpContext::device_context (cuda::bind). Tensor::empty on
// Device::Cuda allocates from the context that is current on the calling thread
// (ContextScope), else from the process default context (the one init_backend made); the
// Executor makes its context current at every entry point. Plain C++: a build without CUDA
// compiles it and fails clearly at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ops/cuda/cuda_arena.h"
#include "ops/registry.h"

namespace strata::cuda {

class DeviceContext {
 public:
  // The process's context of `device`, made on first use and never destroyed (storages may be
  // released during static teardown).
  static DeviceContext& of(int device);
  // Another context on `device` with its own stream, arena, counter and caches. Destroy every
  // tensor allocated in it before the context.
  static std::unique_ptr<DeviceContext> create(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const;
  void* stream() const;  // a cudaStream_t
  Arena& arena();
  int* index_errors() const;  // device pointer handed to kernels
  // Reads and resets the index-error count (synchronizes the stream).
  int64_t take_index_errors();
  void synchronize();  // asynchronous kernel faults surface here as strata::Error
  CopyCounters copy_counters() const;
  ArenaStats arena_stats() const;
  std::string description() const;  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  int multiprocessor_count() const;
  // Free and total bytes of the device, after returning this arena's unused slabs.
  void memory_info(size_t* free_bytes, size_t* total_bytes);
  // Asynchronous copies on this context's stream from / into pinned host memory (counted).
  void copy_h2d_async(void* dst, const void* pinned_src, size_t bytes);
  void copy_d2h_async(void* pinned_dst, const void* src, size_t bytes);

  // A module's state in this context, keyed by an address in that module; made by `make` on
  // first use (under a lock) and destroyed with the context.
  template <class T, class Make>
  T& local(const void* key, Make make) {
    return *static_cast<T*>(local_slot(key, [&] { return std::shared_ptr<void>(make()); }));
  }

  // A second stream of this context for work that runs beside the step's ops (ops/side_branch.h):
  // made on first use. fork_side: the side stream waits for everything enqueued so far on
  // `stream`; join_side: `stream` waits for everything enqueued so far on the side stream. Both
  // are event record + wait, so they also work inside a graph capture (they become its edges).
  void* side_stream();
  void fork_side(void* stream);
  void join_side(void* stream);
  // Drops every module's state (cuBLASLt handle and plans, MoE tables, decode tickets) after
  // the stream's work; the next op makes them again. For a context whose model is unloaded.
  void release_module_state();
  struct State;  // the backend's (device_context.cpp)

 private:
  explicit DeviceContext(int device);
  void* local_slot(const void* key, const std::function<std::shared_ptr<void>()>& make);
  std::unique_ptr<State> s_;
};

// The context current on this thread: the innermost ContextScope's, else the process default.
// Throws when neither exists.
DeviceContext& current_context();
// Makes `c` current on this thread for the scope: its device selected, its arena the thread's
// allocator for Device::Cuda tensors. Restores the previous ones on exit. Nests.
class ContextScope {
 public:
  explicit ContextScope(DeviceContext& c);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  DeviceContext* prev_ = nullptr;
  DeviceAllocator* prev_alloc_ = nullptr;
  int prev_device_ = -1;
};

// ctx.device = Cuda, ctx.stream and ctx.device_context = c's.
void bind(OpContext& ctx, DeviceContext& c);
// The context ops of ctx run in; throws when ctx is not bound to one.
DeviceContext& context_of(const OpContext& ctx);

}  // namespace strata::cuda
