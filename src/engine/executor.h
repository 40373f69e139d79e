// The one executor (DESIGN layout, principle 7): every caller that runs the model goes through
// it (`generate`, `logits`, `bench`, the gate, FP8 calibration, the engine loop, the tests).
// It owns the op context of its device, the caches (Mamba slots and paged KV, sized from
// memory or given), the per-step workspace and the CUDA graphs of decode steps per batch-size
// bucket (1, 2, 4, 8, ... up to max_num_seqs), all captured over one shared input buffer and
// one shared output buffer, so no allocation is kept per graph.
//
// A step is an immutable StepInput (built and validated by prepare() before any state is
// touched) in, logits or sampled ids out. Decode-only steps replay the graph of their bucket
// (padded with dummy rows that write only a reserved scratch slot); mixed and prefill steps run
// eagerly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_plan.h"
#include "engine/cuda_graph.h"
#include "engine/step_input.h"
#include "model/nemotron_h/model.h"
#include "ops/ops.h"

namespace strata::engine {

struct ExecutorConfig {
  Device device = Device::Host;
  int64_t max_num_seqs = 256;   // Mamba slots for requests (one more is kept for graph padding)
  int64_t max_model_len = 0;    // 0: the model's max_position_embeddings (else 4096)
  int64_t block_size = 16;      // KV tokens per block
  // Fraction of the device's memory the run may use (weights + caches + workspace); what the
  // weights and workspace leave goes to Mamba slots for max_num_seqs, then KV blocks.
  double gpu_memory_utilization = 0.9;
  // Host runs: bytes for the caches (0: enough for max_num_seqs x max_model_len).
  size_t host_cache_bytes = 0;
  std::string kv_cache_dtype = "auto";        // auto (the activation dtype) | fp8 (e4m3)
  std::string mamba_ssm_cache_dtype = "auto";  // auto (the config's, f32 default) | float32 | bfloat16
  // A fixed cache plan (tests, single-sequence tools): overrides the sizing above.
  std::optional<cache::CachePlan> cache_plan;
  bool cuda_graphs = true;             // decode steps through graphs (CUDA only)
  // Tests: decode steps padded to their graph bucket but run eagerly (graph replay must equal
  // this bit for bit: same kernels, same shapes).
  bool pad_eager_decode = false;
  int64_t max_num_batched_tokens = 8192;  // workspace is sized for this many tokens per step
  // Run on the caller's context (prepared already: its device, stream and host-op settings;
  // copies and bounces are counted there) instead of one of the executor's own. The caller
  // also answers for the kernel check. The gate and the single-sequence test helpers use it.
  OpContext* run_on = nullptr;
};

// One step's sampled results, on the host.
struct SampledStep {
  std::vector<int32_t> ids;  // [B] one per sequence (-1 where nonfinite)
  std::vector<uint8_t> nonfinite;  // [B] 1: the row's logits had NaN/inf (ids[b] is -1)
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // [B] when requested
  std::vector<float> logprobs;  // [B] the sampled token's logprob when requested
  std::vector<int32_t> ranks;   // [B]
};

// Sampling inputs of one step: one row per sequence in the step.
struct SamplingBatch {
  std::vector<ops::SamplingRow> rows;
  // Per-row sparse inputs, built by the engine from each request's params and tokens (only
  // for rows that use them; shorter vectors or empty entries = none): logit bias (-inf bans a
  // token: min_tokens), and the tokens penalties see with their output count and whether the
  // prompt holds them.
  std::vector<std::vector<std::pair<int32_t, float>>> logit_bias;  // [B]
  struct PenaltyToken {
    int32_t id = 0;
    int32_t output_count = 0;
    bool in_prompt = false;
  };
  std::vector<std::vector<PenaltyToken>> penalty_tokens;  // [B]
  // Guided decoding: per row, ceil(V / 32) words of allowed-token bits (empty = all allowed).
  std::vector<std::vector<uint32_t>> token_mask;  // [B]
};

class Executor {
 public:
  Executor(model::NemotronHModel& model, const ExecutorConfig& config);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const model::ModelConfig& model_config() const { return model_.config(); }
  model::NemotronHModel& model() { return model_; }
  OpContext& context() { return *ctx_; }
  cache::ModelCache& cache() { return *cache_; }
  const cache::CachePlan& plan() const { return plan_; }
  const ExecutorConfig& config() const { return config_; }
  StepLimits limits() const;
  int64_t max_model_len() const { return max_model_len_; }
  // Mamba slots requests may use (the pool holds one more: the graph padding scratch slot).
  int64_t request_slots() const { return plan_.state_slots; }
  // One line per pool: bytes, blocks / slots, and the resulting maximum concurrency.
  std::string describe_pools() const;

  // Builds and validates a step (throws before any state is touched).
  StepInput prepare(const std::vector<SequenceChunk>& seqs, const StepBuildOptions& options = {});
  // The forward of one step; f32 logits on the device: [B, V] or [T, V].
  Tensor forward(const StepInput& step, LogitRows rows);
  // Samples one token per row of `logits` ([B, V] f32 on the device); one d2h copy.
  SampledStep sample(const Tensor& logits, const SamplingBatch& batch);
  // forward + sample for the last token of each sequence; decode-only steps replay the CUDA
  // graph of their batch-size bucket (captured on first use). = launch + collect.
  SampledStep step(const std::vector<SequenceChunk>& seqs, const SamplingBatch& batch);
  // Overlapped execution (the host plans step t+1 while the device runs step t): launch()
  // enqueues the step and returns before the device finishes (CUDA); collect() waits for it
  // and returns its tokens. A chunk with pending_row >= 0 takes its token from the previous
  // launched step's sampled ids (still on the device). Two steps may be launched and not
  // collected at once (the device runs the older while the newer waits behind it on the
  // stream); collect() returns the oldest.
  void launch(const std::vector<SequenceChunk>& seqs, const SamplingBatch& batch);
  SampledStep collect();

  // Copies Mamba state (conv + SSM of every layer) and KV blocks (every attention layer)
  // before a step: n > 1 children start from the prompt's state.
  void copy_slots(const std::vector<std::pair<int32_t, int32_t>>& from_to);
  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& from_to);

  // Graph buckets captured so far (batch size -> graph); the shared workspace's bytes.
  std::vector<int64_t> captured_buckets() const;
  size_t graph_workspace_bytes() const;
  size_t graph_workspace_peak_bytes() const;  // the most the captures have used of it
  static int64_t bucket_for(int64_t batch);  // 1, 2, 4, 8, 16, 32, ... (next power of two)

 private:
  struct InFlight;  // a launched step's outputs on their way to the host (executor_in_flight.h)
  // The step's logits [B, V] f32 on the device (graph replay or eager forward).
  Tensor decode_graph_logits(const std::vector<SequenceChunk>& seqs);
  void take_pending(const StepInput& step);
  // The ring slot the next launch() fills (its staging memory holds the step's input).
  InFlight& next_slot();
  // Enqueues the sample op over `logits` into one output buffer and its copy to the host.
  void enqueue_sample(const Tensor& logits, const SamplingBatch& batch);

  model::NemotronHModel& model_;
  ExecutorConfig config_;
  OpContext own_ctx_;
  OpContext* ctx_ = &own_ctx_;  // own_ctx_, or the caller's (ExecutorConfig::run_on)
  int64_t max_model_len_ = 0;
  cache::CachePlan plan_;
  std::unique_ptr<cache::ModelCache> cache_;
  struct Graphs;
  std::unique_ptr<Graphs> graphs_;
  std::unique_ptr<InFlight> ring_[2];  // launched, not collected: ring_[(head_ + i) % 2]
  int head_ = 0, launched_ = 0;
  Tensor last_ids_;  // [B] i32 on the device: the last launched step's sampled ids
};

// One sequence's Mamba slot and KV blocks in an executor's caches, for the callers that run a
// single sequence by hand (logits, the gate, calibration, tests): the slot and the blocks for
// `max_tokens` are taken at construction and given back at destruction.
class ExecutorSequence {
 public:
  ExecutorSequence(Executor& executor, int64_t max_tokens);
  ~ExecutorSequence();
  ExecutorSequence(const ExecutorSequence&) = delete;
  ExecutorSequence& operator=(const ExecutorSequence&) = delete;

  // This sequence's next chunk (after the tokens already computed).
  SequenceChunk chunk(std::vector<int32_t> tokens) const;
  // prepare + forward of the next chunk; advances the computed count. Logits f32 on the device.
  Tensor forward(std::vector<int32_t> tokens, LogitRows rows);
  // forward + sample of the next chunk through Executor::step (decode graphs included).
  SampledStep step(std::vector<int32_t> tokens, const ops::SamplingRow& row);
  int64_t computed() const { return computed_; }
  void advance(int64_t n) { computed_ += n; }  // tokens run outside forward()/step()
  int32_t slot() const { return slot_; }
  const cache::BlockTable& blocks() const { return blocks_; }

 private:
  Executor& ex_;
  int64_t max_tokens_;
  int32_t slot_ = -1;
  cache::BlockTable blocks_;
  int64_t computed_ = 0;
};

}  // namespace strata::engine
