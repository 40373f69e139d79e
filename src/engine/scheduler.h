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
// A step: schedule() -> the executor runs the plan (slot_copies and block_copies first, then
// the chunks) -> update(plan, sampled ids) -> the engine checks stop conditions and calls
// finish() for the sequences that are done -> the next schedule().
//
// Overlapped (the host builds step t+1 while the device runs step t, as vLLM's async
// scheduling): update() splits into advance(plan t) right after step t is launched, then
// schedule() for t+1 before t's ids are known, then commit(plan t, ids) and the stop checks.
// A sequence whose last token is still on the device gets a decode chunk whose token is
// kPendingToken: the executor substitutes the id that the previous step sampled for that
// sequence (it is on the device already). At most one step may be advanced but not committed
// when schedule() runs. A sequence that stops at commit(t) has also run in step t+1 (one wasted
// row, as in vLLM); finish() frees it at once, which is safe because step t+1 is ahead of any
// later step that reuses its slot or blocks on the device stream.
//
// A sequence is scheduled only while prompt + output < max_model_len (the token it samples
// would be beyond), so nothing ever runs past max_model_len; reaching max_model_len or
// max_tokens is the engine's business (it calls finish()).
//
// Which chunks are decodes: a running sequence with every known token but its last in the
// caches (num_computed > 0 and one token to go) is a decode row; decode rows come first in the
// plan, in admission order, then continuing prefill chunks (num_computed > 0), then the first
// chunks of newly admitted sequences (num_computed == 0), in queue order. State validity is
// num_computed > 0 (has_initial), never the token count: a new one-token prompt is a prefill.
//
// n > 1: a request's completions are sequences of their own. With a prompt of L tokens, the
// parent (completion 0) prefills prompt[0, L-1) only, holding n of the max_num_seqs seats from
// its admission on. In the step after that, the request forks: each child (index 1..n-1) gets
// a new slot whose Mamba state is copied from the parent's (StepPlan::slot_copies: the state
// after L-1 prompt tokens), shares the parent's full KV blocks of those L-1 positions
// (reference counted, read-only: no sequence ever writes below its num_computed) and gets a
// private copy of the parent's partial last block (StepPlan::block_copies) when (L-1) is not a
// multiple of block_size. In that same step all n sequences run the last prompt token as a
// decode row and each samples its own first token, from identical logits. So every chunk
// samples at most one token and no logits row is sampled twice; the cost is one step of
// latency and n-1 extra token rows once per request. The fork's slots and blocks are taken
// in the fork step like a decode's, preempting newer sequences (or the parent itself) when
// short. A one-token prompt has nothing to share: its n completions are independent sequences
// from add() on. After the fork the completions are independent: a preempted child frees its
// references and is re-admitted alone, its prompt + output recomputed.
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
// The constructor throws strata::Error on a config it cannot honour: non-positive limits,
// max_num_batched_tokens < max_num_seqs (as vLLM: every running sequence's decode must fit one
// step), need_kv without blocks or need_slots without slots.

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
  int64_t num_computed = 0;                   // tokens already in the caches
  std::vector<int32_t> tokens;                // this step's tokens
  const cache::BlockTable* blocks = nullptr;  // valid until the next schedule/abort/finish
  bool samples = false;       // the chunk reaches the sequence's end: a token is sampled
  int64_t num_generated = 0;  // tokens the sequence has generated so far (sampling step index)
  uint64_t uid = 0;           // the sequence (update() skips chunks of sequences gone since)
};

// A token sampled by a step that is still running (overlapped scheduling, above).
inline constexpr int32_t kPendingToken = -1;

struct StepPlan {
  std::vector<ScheduledChunk> chunks;                     // decode rows first, then prefill chunks
  std::vector<std::pair<int32_t, int32_t>> slot_copies;   // (from, to) before the step
  std::vector<std::pair<int32_t, int32_t>> block_copies;  // (from, to) before the step
  std::vector<SeqRef> preempted;  // sequences preempted while planning this step
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a validated request (prompt + max_tokens within max_model_len). Returns false,
  // changing nothing, when the waiting queue is full. Throws strata::Error, changing nothing,
  // on a request it could never run: an empty prompt, prompt + max_tokens beyond
  // max_model_len, n beyond max_num_seqs, the slots or the KV blocks of the whole pool, or an
  // id that is already live.
  bool add(const EngineRequest& request);
  // Frees everything the request holds in any state (waiting, mid-prefill, decoding,
  // preempted); false when the id is unknown.
  bool abort(const std::string& request_id);
  // The next step (empty when there is nothing to run).
  StepPlan schedule();
  // After a step ran: sampled[i] is the id chunk i of `plan` sampled (ignored where !samples).
  // Appends the ids to their sequences and advances num_computed. Chunks of sequences aborted
  // or finished since schedule() are skipped. A negative id (non-finite logits) ends the
  // sequence there: it is never scheduled again, and the engine finishes it with an error.
  void update(const StepPlan& plan, const std::vector<int32_t>& sampled);
  // update() in two halves, for overlapped scheduling: advance() once the plan's step is
  // launched (num_computed moves on; each sampled token is kPendingToken until committed),
  // commit() once its ids are known (a preempted sequence keeps the token it sampled).
  void advance(const StepPlan& plan);
  void commit(const StepPlan& plan, const std::vector<int32_t>& sampled);
  // A sequence finished (stop, length, error): frees its blocks and slot now. The request is
  // gone once all its completions finished (finishing a parent before its fork finishes the
  // whole request). Unknown or already finished sequences are ignored.
  void finish(const SeqRef& seq);

  // What a sequence holds (tests, output processing); throws for an unknown sequence. A
  // finished completion's tokens stay readable until its whole request is gone. The last one
  // or two may be kPendingToken between advance() and commit().
  const std::vector<int32_t>& output_tokens(const SeqRef& seq) const;
  int64_t num_live_requests() const;
  int64_t num_waiting() const;
  int64_t num_running() const;
  int64_t num_free_blocks() const;
  int64_t num_free_slots() const;
  int64_t num_preemptions() const;
  bool has_work() const;
  const SchedulerConfig& config() const { return config_; }
  // The pools' bookkeeping (tests check reference counts and leaks through these).
  const cache::BlockAllocator& block_allocator() const;
  const cache::SlotAllocator& slot_allocator() const;

 private:
  struct Impl;
  SchedulerConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::engine
