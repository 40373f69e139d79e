// StepInput: everything one forward step needs to know about its sequences, built once on the
// host by the scheduler's executor and moved to the run's device as ONE packed i32 buffer
// (DESIGN principle 7), so a device step transfers only this in and the sampled ids out.
// Immutable after build().
//
// A step holds B sequences; sequence b contributes q_len_b >= 1 consecutive tokens (a whole
// prompt, a prefill chunk, or one decode token) that follow its num_computed tokens already in
// the caches. Tokens are packed in sequence order. Decode rows come first: the leading
// `num_decode` sequences each add exactly one token to existing state and run the single-token
// kernels (conv update, selective state update, decode attention); the rest run the chunked
// kernels (conv prefill, SSD scan, prefill attention) in the same step (a "mixed" step).
//
// build() validates everything (slots, blocks, lengths, ids) before anything is uploaded, so
// a bad sequence fails the step before any cache is touched.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/kv_block_pool.h"
#include "core/tensor.h"
#include "ops/registry.h"

namespace strata::engine {

// Which rows of a step produce logits.
enum class LogitRows {
  LastPerSequence,  // [B, V]: the last token of each sequence (generation)
  All,              // [T, V]: every token (strata logits, golden tests)
};

// One sequence's part of a step (host description).
struct SequenceChunk {
  int32_t slot = 0;             // Mamba state slot (MambaStatePool)
  int64_t num_computed = 0;     // tokens of this sequence already in the caches
  std::vector<int32_t> tokens;  // this step's tokens, >= 1
  // Its KV blocks, covering num_computed + tokens.size() positions; may be null when the
  // model has no attention layers.
  const cache::BlockTable* blocks = nullptr;
  // Overlapped scheduling: >= 0 when this decode chunk's one token is the id the previous step
  // sampled at that row, still on the device (tokens[0] is then a placeholder).
  int32_t pending_row = -1;
};

// What build() checks a step against: the model and the pools it runs on.
struct StepLimits {
  int64_t vocab_size = 0;     // ids in [0, vocab_size)
  int64_t num_slots = 0;      // Mamba slots in [0, num_slots) (0: the model has no Mamba layers)
  int64_t num_blocks = 0;     // KV block ids in [0, num_blocks)
  int64_t block_size = 16;    // tokens per KV block
  bool need_kv = false;       // the model has attention layers: every sequence needs blocks
  int64_t max_model_len = 0;  // num_computed + q_len <= this (0: unchecked)
};

// How the packed buffer is laid out and where it goes (executor side).
struct StepBuildOptions {
  // Columns of the block table: 0 = as many as the longest context needs; a fixed number
  // (>= that) keeps the layout of every decode step the same (CUDA graph replay).
  int64_t block_columns = 0;
  // Sequences to pad the step to with copies of a dummy decode row (graph buckets): 0 = none.
  // Padding rows read slot `pad_slot` and write KV slot -1 (nowhere); their outputs are unused.
  int64_t pad_to_seqs = 0;
  int32_t pad_slot = 0;
  // A device i32 buffer of exactly the packed size to upload into (one h2d copy) instead of a
  // fresh allocation, so the step's tensors keep their addresses from step to step.
  Tensor target;
  // Pinned host memory of at least `words` i32 to build the step in, for an upload the host
  // does not wait for (device runs; the memory must stay untouched until the device has read
  // it). Empty: a pageable buffer and a copy that waits.
  std::function<int32_t*(size_t words)> staging;
};

// A contiguous run of the step's sequences (its decode part or its prefill part): views into
// the packed buffer, with cu_seqlens rebased to the part's first token.
struct StepPart {
  int64_t first_seq = 0, num_seqs = 0;      // sequences [first_seq, first_seq + num_seqs)
  int64_t first_token = 0, num_tokens = 0;  // rows [first_token, first_token + num_tokens)
  int64_t max_q_len = 0;
  Tensor cu_seqlens;    // [num_seqs + 1] token offsets within the part (starts at 0)
  Tensor slots;         // [num_seqs]
  Tensor has_initial;   // [num_seqs]
  Tensor context_lens;  // [num_seqs]
  Tensor block_tables;  // [num_seqs, columns]
  bool empty() const { return num_seqs == 0; }
  // rows of a [T, ...] activation that belong to this part
  Tensor rows(const Tensor& x) const { return x.slice(0, first_token, num_tokens); }
};

class StepInput {
 public:
  // Throws strata::Error on an empty step, an empty sequence, a slot or block outside its pool,
  // a slot used twice, block tables that are too short, an id outside the vocabulary or a
  // context beyond max_model_len. Nothing is uploaded when it throws.
  static StepInput build(const std::vector<SequenceChunk>& seqs, const StepLimits& limits,
                         Device device, OpContext& ctx, const StepBuildOptions& options = {});
  // Elements of the packed buffer for T tokens, B sequences of which D decode, and
  // `block_columns` columns.
  static int64_t packed_size(int64_t T, int64_t B, int64_t D, int64_t block_columns) {
    return 3 * T + 5 * B + 1 + (B - D + 1) + B * block_columns;
  }

  int64_t num_tokens() const { return num_tokens_; }  // T
  int64_t num_seqs() const { return num_seqs_; }      // B (padding included)
  int64_t num_decode() const { return num_decode_; }  // D: leading single-token decode rows
  int64_t num_real_seqs() const { return num_real_seqs_; }  // B without graph padding
  int64_t max_q_len() const { return max_q_len_; }
  // Every sequence adds exactly one token to existing state: only the decode kernels run.
  bool decode_only() const { return num_decode_ == num_seqs_; }
  const std::vector<int32_t>& host_cu_seqlens() const { return host_cu_seqlens_; }

  StepPart decode_part() const;   // sequences [0, D)
  StepPart prefill_part() const;  // sequences [D, B)

  // Views into the packed buffer (i32, on the run's device).
  const Tensor& token_ids() const { return token_ids_; }        // [T]
  const Tensor& cu_seqlens() const { return cu_seqlens_; }      // [B+1] token offsets
  const Tensor& slots() const { return slots_; }                // [B] Mamba state slots
  const Tensor& has_initial() const { return has_initial_; }    // [B] 1 when num_computed > 0
  const Tensor& context_lens() const { return context_lens_; }  // [B] num_computed + q_len
  const Tensor& last_token_rows() const {
    return last_rows_;
  }  // [B] row of each sequence's last token
  const Tensor& slot_mapping() const {
    return slot_mapping_;
  }  // [T] flat KV slot of each token (-1: none)
  const Tensor& block_tables() const { return block_tables_; }  // [B, max_blocks] (0-padded)
  const Tensor& token_src() const { return token_src_; }  // [T] pending row of a token, or -1
  bool has_pending() const { return has_pending_; }
  const Tensor& packed() const { return packed_; }

 private:
  bool has_pending_ = false;
  int64_t num_tokens_ = 0, num_seqs_ = 0, num_decode_ = 0, num_real_seqs_ = 0, max_q_len_ = 0,
          prefill_max_q_len_ = 0;
  std::vector<int32_t> host_cu_seqlens_;
  Tensor packed_;
  Tensor token_ids_, cu_seqlens_, slots_, has_initial_, context_lens_, last_rows_, slot_mapping_,
      prefill_cu_seqlens_, block_tables_, token_src_;
};

}  // namespace strata::engine
