// The CUDA backend: one device, one stream, one arena. `init_backend` installs the arena as the
// DeviceAllocator for Device::Cuda (so Tensor::empty(..., Device::Cuda) and copies work) and
// creates the stream every kernel and copy runs on. Plain C++: callable from code built without
// CUDA, where `device_available` says why there is no device and `init_backend` throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/cuda/cuda_arena.h"
#include "ops/registry.h"

namespace strata::cuda {

// True when this build has the CUDA backend and a CUDA device can be used; otherwise false and
// *why says what is missing (no nvcc at build time, no driver, no device).
bool device_available(std::string* why);

// Selects `device`, creates the stream and the arena and installs it. Idempotent for the same
// device; a second, different device throws (one device per process). Throws strata::Error
// when the build has no CUDA or the device cannot be used.
void init_backend(int device = 0);
bool backend_initialized();

// The backend's stream (a cudaStream_t). Kernels run on OpContext::stream, which `bind` sets.
void* stream();
void bind(OpContext& ctx);  // ctx.device = Cuda, ctx.stream = stream()

// Waits for the stream; asynchronous kernel faults surface here as strata::Error.
void synchronize();

// Copies made through the arena since start-up, by direction. A decode step's budget is one
// h2d (the packed step input) and one d2h (the sampled ids): compare before/after a step.
CopyCounters copy_counters();
ArenaStats arena_stats();

// Kernels that meet an out-of-range index (token id, slot, block, expert id) skip that element
// and count it here instead of faulting. Reading synchronizes and resets the count.
int* index_error_counter();  // device pointer handed to kernels
int64_t take_index_errors();

// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" of the initialized device.
std::string device_description();
int multiprocessor_count();
// Pinned host memory (cudaMallocHost) for staging copies the host must not wait for; and an
// asynchronous host -> device copy on stream() from it (counted with the arena's copies).
void* alloc_pinned(size_t bytes);
void free_pinned(void* p);
void copy_h2d_async(void* dst, const void* pinned_src, size_t bytes);
void copy_d2h_async(void* pinned_dst, const void* src, size_t bytes);

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
