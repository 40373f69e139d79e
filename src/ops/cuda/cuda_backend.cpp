#include "ops/cuda/cuda_backend.h"

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/log.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/spin.h"

namespace strata::cuda {

namespace {
std::mutex g_init_mu;
std::atomic<DeviceContext*> g_default{nullptr};  // init_backend's context
}  // namespace

DeviceContext* process_default_context() {
  return g_default.load(std::memory_order_acquire);
}

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why)
      *why = fmt::format("no usable CUDA driver/device: {} ({})", cudaGetErrorName(e),
                         cudaGetErrorString(e));
    return false;
  }
  if (n == 0) {
    if (why) *why = "the CUDA driver reports no device";
    return false;
  }
  return true;
}

void init_backend(int device) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  DeviceContext* d = g_default.load();
  if (d && d->device() == device) return;
  if (d)
    fail("the CUDA backend already runs on device {}; cannot switch to {}", d->device(), device);
  std::string why;
  if (!device_available(&why)) fail("--device cuda: {}", why);
  int n = 0;
  STRATA_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    fail("--device cuda:{}: only {} CUDA device(s) present", device, n);
  STRATA_CUDA_CHECK(cudaSetDevice(device));
  DeviceContext& c = DeviceContext::of(device);
  set_device_allocator(Device::Cuda, &c.arena());
  g_default.store(&c, std::memory_order_release);
  log::info("cuda: {}", c.description());
}

DeviceContext& default_context() {
  DeviceContext* d = g_default.load(std::memory_order_acquire);
  if (!d) fail("the CUDA backend is not initialized (call cuda::init_backend first)");
  return *d;
}

bool backend_initialized() {
  return g_default.load() != nullptr;
}

void* stream() {
  return current_context().stream();
}

void bind(OpContext& ctx) {
  bind(ctx, current_context());
}

void synchronize() {
  current_context().synchronize();
}

CopyCounters copy_counters() {
  return current_context().copy_counters();
}
ArenaStats arena_stats() {
  return current_context().arena_stats();
}

int64_t take_index_errors() {
  return current_context().take_index_errors();
}

std::string device_description() {
  return current_context().description();
}

int multiprocessor_count() {
  return current_context().multiprocessor_count();
}

void* alloc_pinned(size_t bytes) {
  void* p = nullptr;
  STRATA_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}

void memory_info(size_t* free_bytes, size_t* total_bytes) {
  current_context().memory_info(free_bytes, total_bytes);
}

double time_ms(const std::function<void()>& fn, int warmup, int reps) {
  DeviceContext& b = current_context();
  STRATA_CHECK_GT(reps, 0);
  for (int i = 0; i < warmup; ++i)
    fn();
  cudaEvent_t start, stop;
  STRATA_CUDA_CHECK(cudaEventCreate(&start));
  STRATA_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    STRATA_CUDA_CHECK(cudaEventRecord(start, static_cast<cudaStream_t>(b.stream())));
    fn();
    STRATA_CUDA_CHECK(cudaEventRecord(stop, static_cast<cudaStream_t>(b.stream())));
    STRATA_CUDA_CHECK(cudaEventSynchronize(stop));
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], start, stop));
  }
  STRATA_CUDA_CHECK(cudaEventDestroy(start));
  STRATA_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[static_cast<size_t>(reps / 2)];
}

double time_graph_ms(const std::function<void()>& fn, int warmup, int reps) {
  DeviceContext& b = current_context();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  STRATA_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(b.stream()), cudaStreamCaptureModeThreadLocal));
  try {
    fn();
  } catch (...) {
    (void)cudaStreamEndCapture(static_cast<cudaStream_t>(b.stream()), &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    throw;
  }
  STRATA_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(b.stream()), &graph));
  STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms =
      time_ms([&] { STRATA_CUDA_CHECK(cudaGraphLaunch(exec, static_cast<cudaStream_t>(b.stream()))); }, warmup, reps);
  STRATA_CUDA_CHECK(cudaGraphExecDestroy(exec));
  STRATA_CUDA_CHECK(cudaGraphDestroy(graph));
  return ms;
}

StreamTimeline::~StreamTimeline() {
  for (void* e : events_)
    cudaEventDestroy(static_cast<cudaEvent_t>(e));  // no check: destructors must not throw
}

void StreamTimeline::mark() {
  DeviceContext& b = current_context();
  if (used_ == events_.size()) {
    cudaEvent_t e;
    STRATA_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  STRATA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_++]), static_cast<cudaStream_t>(b.stream())));
}

std::vector<double> StreamTimeline::intervals_ms() {
  std::vector<double> out;
  if (used_ < 2) return out;
  STRATA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(events_[used_ - 1])));
  for (size_t i = 0; i + 1 < used_; ++i) {
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]),
                                           static_cast<cudaEvent_t>(events_[i + 1])));
    out.push_back(ms);
  }
  return out;
}

void spin(double microseconds) {
  DeviceContext& b = current_context();
  int khz = 0;  // SM clock in kHz = cycles per millisecond
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, b.device()));
  launch_spin(static_cast<int64_t>(microseconds * khz / 1000.0), static_cast<cudaStream_t>(b.stream()));
}

}  // namespace strata::cuda

#else  // built without CUDA: the backend exists only to say why it cannot run

namespace strata::cuda {

// Also device_context.cpp's answer in a build without CUDA.
[[noreturn]] void no_cuda() {
  fail(
      "this strata build has no CUDA backend (nvcc was not found at configure time, or "
      "STRATA_CUDA=OFF)");
}

bool device_available(std::string* why) {
  if (why)
    *why = "this build has no CUDA backend (configured without nvcc or with STRATA_CUDA=OFF)";
  return false;
}
void init_backend(int) {
  no_cuda();
}
bool backend_initialized() {
  return false;
}
void* stream() {
  no_cuda();
}
void bind(OpContext&) {
  no_cuda();
}
DeviceContext& default_context() {
  no_cuda();
}
void synchronize() {
  no_cuda();
}
CopyCounters copy_counters() {
  no_cuda();
}
ArenaStats arena_stats() {
  no_cuda();
}
int64_t take_index_errors() {
  no_cuda();
}
std::string device_description() {
  no_cuda();
}
int multiprocessor_count() {
  no_cuda();
}
void memory_info(size_t*, size_t*) {
  no_cuda();
}
void* alloc_pinned(size_t) {
  no_cuda();
}
void free_pinned(void*) {}
double time_ms(const std::function<void()>&, int, int) {
  no_cuda();
}
double time_graph_ms(const std::function<void()>&, int, int) {
  no_cuda();
}
StreamTimeline::~StreamTimeline() = default;
void StreamTimeline::mark() {
  no_cuda();
}
std::vector<double> StreamTimeline::intervals_ms() {
  no_cuda();
}
void spin(double) {
  no_cuda();
}

}  // namespace strata::cuda

#endif  // STRATA_HAVE_CUDA
