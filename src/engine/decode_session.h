// The executor side of one sequence's run on a device: the op context, the caches, and the
// device buffer every decode step's packed input is uploaded into (one h2d copy per step, at a
// fixed address), the sampled id read back (one d2h copy), and optionally the decode step
// captured once as a CUDA graph and replayed (its shapes are fixed: one sequence, one token,
// the block table padded to the cache's capacity). Used by `strata bench` and the GPU tests
// that count a decode step's transfers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/cache_plan.h"
#include "engine/cuda_graph.h"
#include "model/nemotron_h/model.h"

namespace strata::engine {

struct DecodeSessionOptions {
  int64_t max_context = 4096;  // prompt + decoded tokens the caches hold
  int64_t block_size = 16;
};

class DecodeSession {
 public:
  DecodeSession(model::NemotronHModel& model, Device device, const DecodeSessionOptions& options);
  ~DecodeSession();
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;

  // Prefills `prompt` as one step; returns the last position's logits [1, V] f32 on the device.
  Tensor prefill(const std::vector<int32_t>& prompt);
  // One decode step for `token` at the next position; through the graph once captured.
  Tensor decode(int32_t token);
  // The greedy id of `logits` (the sample op on the device; the id comes back: one d2h copy).
  int32_t greedy(const Tensor& logits);
  // Captures the decode step into a CUDA graph; call after prefill. Consumes one position
  // (the captured step runs once, eagerly, while it is recorded: it decodes `token`). Returns
  // false with *why when the step cannot be captured.
  bool capture_decode(int32_t token, std::string* why, Tensor* logits);
  bool graph_ready() const { return graph_.ready(); }
  const CudaGraph& graph() const { return graph_; }

  OpContext& context() { return ctx_; }
  int64_t position() const { return computed_; }
  void* stream() const { return ctx_.stream; }

 private:
  model::StepInput build_decode(int32_t token);

  model::NemotronHModel& model_;
  DecodeSessionOptions options_;
  OpContext ctx_;
  bool ready_;
  cache::ModelCache cache_;
  int32_t slot_ = -1;
  cache::BlockTable blocks_;
  int64_t computed_ = 0;
  int64_t block_columns_ = 0;
  Tensor decode_input_;  // [packed] i32 on the device: every decode step's input lands here
  Tensor graph_logits_;  // [1, V] f32: what the captured step writes
  CudaGraph graph_;
};

}  // namespace strata::engine
