// CUDA graph capture of a step (the executor owns graphs, DESIGN layout). capture() records
// everything `fn` enqueues on the stream into a graph and instantiates it; replay() relaunches
// it. While capturing, every device allocation is held until the graph is destroyed, so the
// workspaces the captured kernels write stay theirs between replays. A capture fails (and says
// why) when `fn` does anything a graph cannot hold: a host synchronization or a synchronous
// copy on the stream inside the step. That makes a successful capture the proof that the step
// has no host sync inside it. Builds without CUDA: capture() returns false.
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
  // stream is usable again either way). `hold_allocations`: keep every device block allocated
  // while capturing until the graph is destroyed (false when the caller captures into a
  // workspace it owns, such as the executor's shared graph region).
  bool capture(void* stream, const std::function<void()>& fn, std::string* why,
               bool hold_allocations = true);
  // Destroys the graph and releases what it held.
  void reset();
  bool ready() const { return exec_ != nullptr; }
  void replay(void* stream);
  size_t held_bytes() const;  // device memory reserved for the graph's workspaces

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  std::vector<std::shared_ptr<Storage>> held_;
};

}  // namespace strata::engine
