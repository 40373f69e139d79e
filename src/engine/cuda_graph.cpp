#include "engine/cuda_graph.h"

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace strata::engine {

CudaGraph::~CudaGraph() {
  reset();
}

#ifdef STRATA_HAVE_CUDA

void CudaGraph::reset() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
}

bool CudaGraph::capture(void* stream, const std::function<void()>& fn, std::string* why) {
  reset();
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    *why = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(e));
    return false;
  }
  std::string failure;
  try {
    fn();
  } catch (const std::exception& ex) {
    failure = ex.what();
  }
  cudaGraph_t g = nullptr;
  e = cudaStreamEndCapture(s, &g);
  if (failure.empty() && e != cudaSuccess)
    failure = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(e));
  if (!failure.empty()) {
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();  // clear a sticky capture error
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

void CudaGraph::reset() {}

bool CudaGraph::capture(void*, const std::function<void()>&, std::string* why) {
  *why = "this strata build has no CUDA backend";
  return false;
}

void CudaGraph::replay(void*) {
  fail("CUDA graph: this strata build has no CUDA backend");
}

#endif

}  // namespace strata::engine
