// The CUDA backend's process-level entry points. Device state (stream, arena, index-error
// counter, caches) belongs to a DeviceContext (device_context.h); `init_backend` makes the
// process default context of a device and installs its arena as the process-wide allocator for
// Device::Cuda. The functions below act on the calling thread's current context
// (current_context(): the innermost ContextScope's, else the default). Plain C++: callable from
// code built without CUDA, where `device_available` says why there is no device and
// `init_backend` throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/cuda/cuda_arena.h"
#include "ops/cuda/device_context.h"
#include "ops/registry.h"

namespace strata::cuda {

// True when this build has the CUDA backend and a CUDA device can be used; otherwise false and
// *why says what is missing (no nvcc at build time, no driver, no device).
bool device_available(std::string* why);

// Makes DeviceContext::of(device) the process default (its arena the process-wide allocator).
// Idempotent for the same device; a second, different device throws (more devices take their
// own DeviceContext). Throws strata::Error when the build has no CUDA or the device cannot be
// used.
void init_backend(int device = 0);
bool backend_initialized();
DeviceContext& default_context();  // throws before init_backend

// The current context's stream (a cudaStream_t). Kernels run on OpContext::stream.
void* stream();
void bind(OpContext& ctx);  // bind(ctx, current_context())

// Waits for the stream; asynchronous kernel faults surface here as strata::Error.
void synchronize();

// Copies made through the arena since start-up, by direction. A decode step's budget is one
// h2d (the packed step input) and one d2h (the sampled ids): compare before/after a step.
CopyCounters copy_counters();
ArenaStats arena_stats();

// Kernels that meet an out-of-range index (token id, slot, block, expert id) skip that element
// and count it in their context instead of faulting. Reading synchronizes and resets the count.
int64_t take_index_errors();

// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" of the initialized device.
std::string device_description();
int multiprocessor_count();
// Pinned host memory (cudaMallocHost) for staging copies the host must not wait for
// (DeviceContext::copy_h2d_async / copy_d2h_async).
void* alloc_pinned(size_t bytes);
void free_pinned(void* p);

// Free and total bytes of the device, after returning the arena's unused slabs to it.
void memory_info(size_t* free_bytes, size_t* total_bytes);

// Median milliseconds of `fn` (which enqueues work on stream()) over `reps` timed runs after
// `warmup` runs, each timed with CUDA events.
double time_ms(const std::function<void()>& fn, int warmup, int reps);
// Captures what `fn` enqueues on stream() into a CUDA graph once, then returns the median
// milliseconds of one replay over `reps` replays after `warmup` (launch gaps removed, as the
// engine's decode graphs will run). `fn` must not synchronize or copy to/from the host.
double time_graph_ms(const std::function<void()>& fn, int warmup, int reps);

// Profiling (strata bench --profile-ops): events recorded on stream() in order; after the work
// is done, intervals_ms()[i] is the time from mark i to mark i + 1.
class StreamTimeline {
 public:
  StreamTimeline() = default;
  ~StreamTimeline();
  StreamTimeline(const StreamTimeline&) = delete;
  StreamTimeline& operator=(const StreamTimeline&) = delete;
  void mark();
  void clear() { used_ = 0; }  // reuse the events for the next step
  size_t marks() const { return used_; }
  std::vector<double> intervals_ms();  // synchronizes on the last mark

 private:
  std::vector<void*> events_;  // cudaEvent_t, grown on demand
  size_t used_ = 0;
};

// Holds stream() busy for about `microseconds` (a one-thread spinning kernel): put in front of
// an eager step, the host enqueues the step meanwhile and its kernels then run back to back.
void spin(double microseconds);

}  // namespace strata::cuda
