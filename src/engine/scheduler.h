// The scheduler (DESIGN principle 6, as vLLM V1 schedules): a token budget per step
// (max_num_batched_tokens), at most max_num_seqs running sequences, decodes first then prefill
// chunks in arrival order, chunked prefill carrying conv and SSM state across chunks (a chunk
// is prefill with an initial state), preemption by recompute when KV blocks or Mamba slots run
// out (the newest running sequence goes back to the front of the waiting queue, everything it
// held freed, and is re-admitted later with its prompt and generated tokens as the prompt),
// abort in any state freeing every block and slot at once, FIFO fairness.
//
// Pure host code: it owns the lifetimes of KV blocks and Mamba slots (cache::BlockAllocator,
// cache::SlotAllocator: ids only, no tensors), never touches device memory, and is tested on
// the CPU with a fake model runner (tests/engine). The executor owns what the bytes mean.
//
// n > 1: a request's completions are sequences of their own. The prompt is prefilled once (by
// the parent, completion 0); when its prefill finishes, each child gets a slot whose Mamba state
// is copied from the parent's (StepPlan::slot_copies, run by the executor before the step) and
// shares the parent's full KV blocks (reference counted); the partial last block is copied
// (StepPlan::block_copies).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_allocator.h"
#include "cache/kv_block_pool.h"
#include "engine/request.h"

namespace strata::engine {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;             // running sequences at most (completions count)
  int64_t max_num_batched_tokens = 8192;  // tokens per step at most
  int64_t max_model_len = 4096;           // prompt + generated tokens per sequence
  int64_t block_size = 16;
  int64_t num_blocks = 0;  // KV blocks in the pool (0: the model has no attention layers)
  int64_t num_slots = 0;   // Mamba slots requests may use (0: the model has no Mamba layers)
  bool need_kv = false;
  bool need_slots = false;
  int64_t max_waiting = 0;  // 0: unbounded; else add() refuses beyond it (server 503)
};

// A sequence: one completion of one request.
struct SeqRef {
  std::string request_id;
  int32_t index = 0;  // completion index < n
  bool operator==(const SeqRef& o) const = default;
};

// One sequence's part of a step.
struct ScheduledChunk {
  SeqRef seq;
  int32_t slot = -1;
  int64_t num_computed = 0;            // tokens already in the caches
  std::vector<int32_t> tokens;         // this step's tokens
  const cache::BlockTable* blocks = nullptr;  // valid until the next schedule()/abort()
  bool samples = false;       // the chunk reaches the sequence's end: a token is sampled
  int64_t num_generated = 0;  // tokens the sequence has generated so far (sampling step index)
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decode rows first, then prefill chunks
  std::vector<std::pair<int32_t, int32_t>> slot_copies;   // (from, to) before the step
  std::vector<std::pair<int32_t, int32_t>> block_copies;  // (from, to) before the step
  std::vector<SeqRef> preempted;  // sequences preempted while planning this step
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a validated request (prompt + max_tokens within max_model_len). Returns false,
  // changing nothing, when the waiting queue is full.
  bool add(const EngineRequest& request);
  // Frees everything the request holds in any state (waiting, mid-prefill, decoding,
  // preempted); false when the id is unknown.
  bool abort(const std::string& request_id);
  // The next step (empty when there is nothing to run).
  StepPlan schedule();
  // After a step ran: sampled[i] is the id chunk i of `plan` sampled (ignored where !samples).
  // Appends the ids to their sequences and advances num_computed.
  void update(const StepPlan& plan, const std::vector<int32_t>& sampled);
  // A sequence finished (stop, length, error): frees its blocks and slot now. The request is
  // gone once all its completions finished.
  void finish(const SeqRef& seq);

  // What a sequence holds (tests, output processing).
  const std::vector<int32_t>& output_tokens(const SeqRef& seq) const;
  int64_t num_waiting() const;
  int64_t num_running() const;
  int64_t num_free_blocks() const;
  int64_t num_free_slots() const;
  int64_t num_preemptions() const;
  bool has_work() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Impl;
  SchedulerConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::engine
