#include "engine/cuda_graph.h"

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace strata::engine {

namespace {

// Forwards to the installed allocator and keeps every block it hands out.
class HoldingAllocator final : public DeviceAllocator {
 public:
  HoldingAllocator(DeviceAllocator* inner, std::vector<std::shared_ptr<Storage>>* held)
      : inner_(inner), held_(held) {}
  std::shared_ptr<Storage> allocate(size_t bytes) override {
    auto s = inner_->allocate(bytes);
    held_->push_back(s);
    return s;
  }
  void copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) override {
    inner_->copy(dst, dd, src, sd, bytes);
  }

 private:
  DeviceAllocator* inner_;
  std::vector<std::shared_ptr<Storage>>* held_;
};

}  // namespace

CudaGraph::~CudaGraph() {
  reset();
}

size_t CudaGraph::held_bytes() const {
  size_t b = 0;
  for (const auto& s : held_)
    b += s->bytes;
  return b;
}

#ifdef STRATA_HAVE_CUDA

void CudaGraph::reset() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  held_.clear();
}

bool CudaGraph::capture(void* stream, const std::function<void()>& fn, std::string* why,
                        bool hold_allocations) {
  reset();
  auto s = static_cast<cudaStream_t>(stream);
  DeviceAllocator* inner = device_allocator(Device::Cuda);
  HoldingAllocator holding(inner, &held_);
  DeviceAllocator* during = hold_allocations ? static_cast<DeviceAllocator*>(&holding) : inner;
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    *why = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(e));
    return false;
  }
  set_device_allocator(Device::Cuda, during);
  std::string failure;
  try {
    fn();
  } catch (const std::exception& ex) {
    failure = ex.what();
  }
  set_device_allocator(Device::Cuda, inner);
  cudaGraph_t g = nullptr;
  e = cudaStreamEndCapture(s, &g);
  if (failure.empty() && e != cudaSuccess)
    failure = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(e));
  if (!failure.empty()) {
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();  // clear a sticky capture error
    held_.clear();
    *why = failure;
    return false;
  }
  graph_ = g;
  cudaGraphExec_t x = nullptr;
  e = cudaGraphInstantiate(&x, g, 0);
  if (e != cudaSuccess) {
    *why = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(e));
    reset();
    return false;
  }
  exec_ = x;
  return true;
}

void CudaGraph::replay(void* stream) {
  if (!exec_) fail("CUDA graph: replay before a successful capture");
  const cudaError_t e =
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) fail("cudaGraphLaunch: {}", cudaGetErrorString(e));
}

#else

void CudaGraph::reset() {
  held_.clear();
}

bool CudaGraph::capture(void*, const std::function<void()>&, std::string* why, bool) {
  *why = "this strata build has no CUDA backend";
  return false;
}

void CudaGraph::replay(void*) {
  fail("CUDA graph: this strata build has no CUDA backend");
}

#endif

}  // namespace strata::engine
