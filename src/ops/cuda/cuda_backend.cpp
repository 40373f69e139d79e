#include "ops/cuda/cuda_backend.h"

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/log.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/spin.h"

namespace strata::cuda {

namespace {
struct Backend {
  int device = -1;
  cudaStream_t stream = nullptr;
  Arena* arena = nullptr;  // never destroyed: storages may be released during static teardown
  int* index_errors = nullptr;
  cudaDeviceProp prop{};
};
Backend g;
std::mutex g_init_mu;

Backend& ready() {
  if (g.device < 0) fail("the CUDA backend is not initialized (call cuda::init_backend first)");
  return g;
}
}  // namespace

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
  if (g.device == device) return;
  if (g.device >= 0)
    fail("the CUDA backend already runs on device {}; cannot switch to {}", g.device, device);
  std::string why;
  if (!device_available(&why)) fail("--device cuda: {}", why);
  int n = 0;
  STRATA_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    fail("--device cuda:{}: only {} CUDA device(s) present", device, n);
  STRATA_CUDA_CHECK(cudaSetDevice(device));
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&g.prop, device));
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  g.arena = new Arena(g.stream);
  STRATA_CUDA_CHECK(cudaMalloc(&g.index_errors, sizeof(int)));
  STRATA_CUDA_CHECK(cudaMemset(g.index_errors, 0, sizeof(int)));
  g.device = device;
  set_device_allocator(Device::Cuda, g.arena);
  log::info("cuda: {}", device_description());
}

bool backend_initialized() {
  return g.device >= 0;
}

void* stream() {
  return ready().stream;
}

void bind(OpContext& ctx) {
  ctx.device = Device::Cuda;
  ctx.stream = ready().stream;
}

void synchronize() {
  STRATA_CUDA_CHECK(cudaStreamSynchronize(ready().stream));
}

CopyCounters copy_counters() {
  return ready().arena->copies();
}
ArenaStats arena_stats() {
  return ready().arena->stats();
}

int* index_error_counter() {
  return ready().index_errors;
}

int64_t take_index_errors() {
  Backend& b = ready();
  int v = 0;
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(&v, b.index_errors, sizeof(int), cudaMemcpyDeviceToHost, b.stream));
  STRATA_CUDA_CHECK(cudaMemsetAsync(b.index_errors, 0, sizeof(int), b.stream));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  return v;
}

std::string device_description() {
  const Backend& b = ready();
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", b.prop.name, b.prop.major, b.prop.minor,
                     b.prop.multiProcessorCount,
                     static_cast<double>(b.prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

int multiprocessor_count() {
  return ready().prop.multiProcessorCount;
}

void* alloc_pinned(size_t bytes) {
  void* p = nullptr;
  STRATA_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}
void copy_h2d_async(void* dst, const void* pinned_src, size_t bytes) {
  ready().arena->copy_h2d_async(dst, pinned_src, bytes);
}
void copy_d2h_async(void* pinned_dst, const void* src, size_t bytes) {
  ready().arena->copy_d2h_async(pinned_dst, src, bytes);
}

void memory_info(size_t* free_bytes, size_t* total_bytes) {
  Backend& b = ready();
  STRATA_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  b.arena->trim();  // slabs with no live block go back: free memory is what others may take
  STRATA_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

double time_ms(const std::function<void()>& fn, int warmup, int reps) {
  Backend& b = ready();
  STRATA_CHECK_GT(reps, 0);
  for (int i = 0; i < warmup; ++i)
    fn();
  cudaEvent_t start, stop;
  STRATA_CUDA_CHECK(cudaEventCreate(&start));
  STRATA_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    STRATA_CUDA_CHECK(cudaEventRecord(start, b.stream));
    fn();
    STRATA_CUDA_CHECK(cudaEventRecord(stop, b.stream));
    STRATA_CUDA_CHECK(cudaEventSynchronize(stop));
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], start, stop));
  }
  STRATA_CUDA_CHECK(cudaEventDestroy(start));
  STRATA_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[static_cast<size_t>(reps / 2)];
}

double time_graph_ms(const std::function<void()>& fn, int warmup, int reps) {
  Backend& b = ready();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  STRATA_CUDA_CHECK(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal));
  try {
    fn();
  } catch (...) {
    (void)cudaStreamEndCapture(b.stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    throw;
  }
  STRATA_CUDA_CHECK(cudaStreamEndCapture(b.stream, &graph));
  STRATA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms =
      time_ms([&] { STRATA_CUDA_CHECK(cudaGraphLaunch(exec, b.stream)); }, warmup, reps);
  STRATA_CUDA_CHECK(cudaGraphExecDestroy(exec));
  STRATA_CUDA_CHECK(cudaGraphDestroy(graph));
  return ms;
}

StreamTimeline::~StreamTimeline() {
  for (void* e : events_)
    cudaEventDestroy(static_cast<cudaEvent_t>(e));  // no check: destructors must not throw
}

void StreamTimeline::mark() {
  Backend& b = ready();
  if (used_ == events_.size()) {
    cudaEvent_t e;
    STRATA_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  STRATA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_++]), b.stream));
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
  Backend& b = ready();
  int khz = 0;  // SM clock in kHz = cycles per millisecond
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, b.device));
  launch_spin(static_cast<int64_t>(microseconds * khz / 1000.0), b.stream);
}

}  // namespace strata::cuda

#else  // built without CUDA: the backend exists only to say why it cannot run

namespace strata::cuda {

namespace {
[[noreturn]] void no_cuda() {
  fail(
      "this strata build has no CUDA backend (nvcc was not found at configure time, or "
      "STRATA_CUDA=OFF)");
}
}  // namespace

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
void synchronize() {
  no_cuda();
}
CopyCounters copy_counters() {
  no_cuda();
}
ArenaStats arena_stats() {
  no_cuda();
}
int* index_error_counter() {
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
void copy_h2d_async(void*, const void*, size_t) {
  no_cuda();
}
void copy_d2h_async(void*, const void*, size_t) {
  no_cuda();
}
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
