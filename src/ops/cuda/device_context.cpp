#include "ops/cuda/device_context.h"

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/log.h"
#include "ops/cuda/cuda_check.h"

namespace strata::cuda {

struct DeviceContext::State {
  int device = -1;
  cudaStream_t stream = nullptr;
  std::unique_ptr<Arena> arena;
  int* index_errors = nullptr;
  cudaDeviceProp prop{};
  std::mutex local_mu;
  std::map<const void*, std::shared_ptr<void>> locals;
  cudaStream_t side = nullptr;  // side_stream(), with its two events
  cudaEvent_t fork = nullptr, join = nullptr;
};

namespace {
std::mutex g_registry_mu;
std::map<int, DeviceContext*> g_process_contexts;  // never destroyed, like their arenas
thread_local DeviceContext* t_current = nullptr;

// Runs fn with `device` selected, restoring the thread's device after.
template <class Fn>
void on_device(int device, Fn fn) {
  int prev = -1;
  STRATA_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != device) STRATA_CUDA_CHECK(cudaSetDevice(device));
  fn();
  if (prev != device) STRATA_CUDA_CHECK(cudaSetDevice(prev));
}
}  // namespace

DeviceContext::DeviceContext(int device) : s_(std::make_unique<State>()) {
  int n = 0;
  STRATA_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    fail("--device cuda:{}: only {} CUDA device(s) present", device, n);
  s_->device = device;
  on_device(device, [&] {
    STRATA_CUDA_CHECK(cudaGetDeviceProperties(&s_->prop, device));
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking));
    s_->arena = std::make_unique<Arena>(s_->stream);
    STRATA_CUDA_CHECK(cudaMalloc(&s_->index_errors, sizeof(int)));
    STRATA_CUDA_CHECK(cudaMemset(s_->index_errors, 0, sizeof(int)));
  });
}

DeviceContext::~DeviceContext() {
  // No checks: destructors must not throw. Work still queued finishes before anything goes.
  int prev = -1;
  (void)cudaGetDevice(&prev);
  (void)cudaSetDevice(s_->device);
  (void)cudaStreamSynchronize(s_->stream);
  s_->locals.clear();  // module state (cuBLASLt handles, tables) before the arena and stream
  // The slabs go back to the driver (a process context is never destroyed, so only contexts
  // made by create() get here, during normal program flow). Slabs still holding a block stay
  // allocated: a tensor that outlives its context breaks the contract above; say so.
  try {
    s_->arena->trim();
    const int64_t live = s_->arena->stats().live_blocks;
    if (live > 0)
      log::warn("cuda context on device {} destroyed with {} live blocks (tensors outlive it)",
                s_->device, live);
  } catch (...) {
  }
  s_->arena.reset();
  if (s_->side) {
    (void)cudaStreamSynchronize(s_->side);
    (void)cudaEventDestroy(s_->fork);
    (void)cudaEventDestroy(s_->join);
    (void)cudaStreamDestroy(s_->side);
  }
  (void)cudaFree(s_->index_errors);
  (void)cudaStreamDestroy(s_->stream);
  if (prev >= 0) (void)cudaSetDevice(prev);
}

DeviceContext& DeviceContext::of(int device) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto it = g_process_contexts.find(device);
  if (it != g_process_contexts.end()) return *it->second;
  auto* c = new DeviceContext(device);
  g_process_contexts.emplace(device, c);
  return *c;
}

std::unique_ptr<DeviceContext> DeviceContext::create(int device) {
  return std::unique_ptr<DeviceContext>(new DeviceContext(device));
}

int DeviceContext::device() const {
  return s_->device;
}
void* DeviceContext::stream() const {
  return s_->stream;
}
Arena& DeviceContext::arena() {
  return *s_->arena;
}
int* DeviceContext::index_errors() const {
  return s_->index_errors;
}

int64_t DeviceContext::take_index_errors() {
  int v = 0;
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(&v, s_->index_errors, sizeof(int), cudaMemcpyDeviceToHost, s_->stream));
  STRATA_CUDA_CHECK(cudaMemsetAsync(s_->index_errors, 0, sizeof(int), s_->stream));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  return v;
}

void DeviceContext::synchronize() {
  STRATA_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
}

CopyCounters DeviceContext::copy_counters() const {
  return s_->arena->copies();
}
ArenaStats DeviceContext::arena_stats() const {
  return s_->arena->stats();
}

std::string DeviceContext::description() const {
  const cudaDeviceProp& p = s_->prop;
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", p.name, p.major, p.minor,
                     p.multiProcessorCount,
                     static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

int DeviceContext::multiprocessor_count() const {
  return s_->prop.multiProcessorCount;
}

void DeviceContext::memory_info(size_t* free_bytes, size_t* total_bytes) {
  on_device(s_->device, [&] {
    STRATA_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
    s_->arena->trim();  // slabs with no live block go back: free memory is what others may take
    STRATA_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  });
}

void DeviceContext::copy_h2d_async(void* dst, const void* pinned_src, size_t bytes) {
  s_->arena->copy_h2d_async(dst, pinned_src, bytes);
}
void DeviceContext::copy_d2h_async(void* pinned_dst, const void* src, size_t bytes) {
  s_->arena->copy_d2h_async(pinned_dst, src, bytes);
}

void* DeviceContext::side_stream() {
  std::lock_guard<std::mutex> lock(s_->local_mu);
  if (!s_->side) {
    on_device(s_->device, [&] {
      STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&s_->side, cudaStreamNonBlocking));
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&s_->fork, cudaEventDisableTiming));
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&s_->join, cudaEventDisableTiming));
    });
  }
  return s_->side;
}

void DeviceContext::fork_side(void* stream) {
  auto side = static_cast<cudaStream_t>(side_stream());
  STRATA_CUDA_CHECK(cudaEventRecord(s_->fork, static_cast<cudaStream_t>(stream)));
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(side, s_->fork, 0));
}

void DeviceContext::join_side(void* stream) {
  auto side = static_cast<cudaStream_t>(side_stream());
  STRATA_CUDA_CHECK(cudaEventRecord(s_->join, side));
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), s_->join, 0));
}

void DeviceContext::release_module_state() {
  on_device(s_->device, [&] { STRATA_CUDA_CHECK(cudaStreamSynchronize(s_->stream)); });
  std::map<const void*, std::shared_ptr<void>> gone;
  {
    std::lock_guard<std::mutex> lock(s_->local_mu);
    gone.swap(s_->locals);
  }
}

void* DeviceContext::local_slot(const void* key,
                                const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard<std::mutex> lock(s_->local_mu);
  std::shared_ptr<void>& slot = s_->locals[key];
  if (!slot) slot = make();
  return slot.get();
}

DeviceContext* process_default_context();  // cuda_backend.cpp: the one init_backend made

DeviceContext& current_context() {
  if (t_current) return *t_current;
  if (DeviceContext* d = process_default_context()) return *d;
  fail("the CUDA backend is not initialized (call cuda::init_backend first)");
}

ContextScope::ContextScope(DeviceContext& c) : prev_(t_current) {
  // The device first: if selecting it throws, nothing of this thread's state has changed.
  STRATA_CUDA_CHECK(cudaGetDevice(&prev_device_));
  if (prev_device_ != c.device()) STRATA_CUDA_CHECK(cudaSetDevice(c.device()));
  prev_alloc_ = set_thread_device_allocator(Device::Cuda, &c.arena());
  t_current = &c;
}

ContextScope::~ContextScope() {
  if (t_current && prev_device_ >= 0 && t_current->device() != prev_device_)
    (void)cudaSetDevice(prev_device_);  // no check: destructors must not throw
  t_current = prev_;
  set_thread_device_allocator(Device::Cuda, prev_alloc_);
}

void bind(OpContext& ctx, DeviceContext& c) {
  ctx.device = Device::Cuda;
  ctx.stream = c.stream();
  ctx.device_context = &c;
}

DeviceContext& context_of(const OpContext& ctx) {
  if (!ctx.device_context)
    fail("a CUDA op ran with a context that is not bound to a device (cuda::bind)");
  return *static_cast<DeviceContext*>(ctx.device_context);
}

}  // namespace strata::cuda

#else  // built without CUDA

namespace strata::cuda {

[[noreturn]] void no_cuda();  // cuda_backend.cpp: why this build cannot run CUDA

struct DeviceContext::State {};

DeviceContext::DeviceContext(int) {
  no_cuda();
}
DeviceContext::~DeviceContext() = default;
DeviceContext& DeviceContext::of(int) {
  no_cuda();
}
std::unique_ptr<DeviceContext> DeviceContext::create(int) {
  no_cuda();
}
int DeviceContext::device() const {
  no_cuda();
}
void* DeviceContext::stream() const {
  no_cuda();
}
Arena& DeviceContext::arena() {
  no_cuda();
}
int* DeviceContext::index_errors() const {
  no_cuda();
}
int64_t DeviceContext::take_index_errors() {
  no_cuda();
}
void DeviceContext::synchronize() {
  no_cuda();
}
CopyCounters DeviceContext::copy_counters() const {
  no_cuda();
}
ArenaStats DeviceContext::arena_stats() const {
  no_cuda();
}
std::string DeviceContext::description() const {
  no_cuda();
}
int DeviceContext::multiprocessor_count() const {
  no_cuda();
}
void DeviceContext::memory_info(size_t*, size_t*) {
  no_cuda();
}
void DeviceContext::copy_h2d_async(void*, const void*, size_t) {
  no_cuda();
}
void DeviceContext::copy_d2h_async(void*, const void*, size_t) {
  no_cuda();
}
void* DeviceContext::side_stream() {
  no_cuda();
}
void DeviceContext::fork_side(void*) {
  no_cuda();
}
void DeviceContext::join_side(void*) {
  no_cuda();
}
void DeviceContext::release_module_state() {
  no_cuda();
}
void* DeviceContext::local_slot(const void*, const std::function<std::shared_ptr<void>()>&) {
  no_cuda();
}
DeviceContext& current_context() {
  no_cuda();
}
ContextScope::ContextScope(DeviceContext&) {
  no_cuda();
}
ContextScope::~ContextScope() = default;
void bind(OpContext&, DeviceContext&) {
  no_cuda();
}
DeviceContext& context_of(const OpContext&) {
  no_cuda();
}

}  // namespace strata::cuda

#endif  // STRATA_HAVE_CUDA
