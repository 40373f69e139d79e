// StepInput: everything one forward step needs to know about its sequences, built once on the
// host and moved to the run's device as ONE packed i32 buffer (DESIGN principle 7), so a device
// step transfers only this in and the sampled ids out. Immutable after build().
//
// A step holds B sequences; sequence b contributes q_len_b >= 1 consecutive tokens (a whole
// prompt, a prefill chunk, or one decode token) that follow its num_computed tokens already in
// the caches. Tokens are packed in sequence order.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/kv_block_pool.h"
#include "core/tensor.h"
#include "ops/registry.h"

namespace strata::model {

// One sequence's part of a step (host description).
struct SequenceChunk {
  int32_t slot = 0;             // Mamba state slot (MambaStatePool)
  int64_t num_computed = 0;     // tokens of this sequence already in the caches
  std::vector<int32_t> tokens;  // this step's tokens, >= 1
  // Its KV blocks, covering num_computed + tokens.size() positions; may be null when the
  // model has no attention layers.
  const cache::BlockTable* blocks = nullptr;
};

// How the packed buffer is laid out and where it goes (executor side).
struct StepBuildOptions {
  // Columns of the block table: 0 = as many as the longest context needs; a fixed number
  // (>= that) keeps the layout of every decode step the same (CUDA graph replay).
  int64_t block_columns = 0;
  // A device i32 buffer of exactly the packed size to upload into (one h2d copy) instead of a
  // fresh allocation, so the step's tensors keep their addresses from step to step.
  Tensor target;
};

class StepInput {
 public:
  // `block_size` of the KV pool; `need_kv` when the model has attention layers. Throws
  // strata::Error on an empty step, an empty sequence, or block tables that are too short.
  static StepInput build(const std::vector<SequenceChunk>& seqs, int64_t block_size, bool need_kv,
                         Device device, OpContext& ctx, const StepBuildOptions& options = {});
  // Elements of the packed buffer for T tokens, B sequences and `block_columns` columns.
  static int64_t packed_size(int64_t T, int64_t B, int64_t block_columns) {
    return 2 * T + 5 * B + 1 + B * block_columns;
  }

  int64_t num_tokens() const { return num_tokens_; }  // T
  int64_t num_seqs() const { return num_seqs_; }      // B
  int64_t max_q_len() const { return max_q_len_; }
  // Every sequence adds exactly one token to existing state: the decode kernels apply.
  bool decode_only() const { return decode_only_; }
  const std::vector<int32_t>& host_cu_seqlens() const { return host_cu_seqlens_; }

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
  const Tensor& packed() const { return packed_; }

 private:
  int64_t num_tokens_ = 0, num_seqs_ = 0, max_q_len_ = 0;
  bool decode_only_ = false;
  std::vector<int32_t> host_cu_seqlens_;
  Tensor packed_;
  Tensor token_ids_, cu_seqlens_, slots_, has_initial_, context_lens_, last_rows_, slot_mapping_,
      block_tables_;
};

}  // namespace strata::model
