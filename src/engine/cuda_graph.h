// CUDA graph capture of a step (the executor owns graphs, DESIGN layout). capture() records
// everything `fn` enqueues on the stream into a graph and instantiates it; replay() relaunches
// it. The memory the captured kernels write is the caller's to keep valid between replays (the
// executor captures into its shared workspace region). A capture fails (and says why) when `fn`
// does anything a graph cannot hold: a host synchronization or a synchronous copy on the stream
// inside the step. That makes a successful capture the proof that the step has no host sync
// inside it. Builds without CUDA: capture() returns false.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::engine {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Captures fn()'s work on `stream` (a cudaStream_t). Returns false with *why on failure (the
  // stream is usable again either way).
  bool capture(void* stream, const std::function<void()>& fn, std::string* why);
  void reset();  // destroys the graph
  bool ready() const { return exec_ != nullptr; }
  void replay(void* stream);

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace strata::engine
