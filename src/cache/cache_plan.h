// Sizing the caches from the config and a budget, and the pair of pools a model run uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "cache/kv_block_pool.h"
#include "cache/mamba_state_pool.h"
#include "model/nemotron_h/config.h"

namespace strata::cache {

struct CachePlan {
  int64_t state_slots = 0;        // sequences that can be live at once
  int64_t num_blocks = 0;         // KV blocks (0 when the model has no attention layers)
  int64_t block_size = 16;        // tokens per KV block
  DType act_dtype = DType::BF16;  // conv states and KV cache
  size_t state_bytes = 0, kv_bytes = 0;
};

// `max_seqs` state slots, and as many KV blocks as the rest of `budget_bytes` holds. Throws
// naming both numbers when the budget cannot hold the states plus one block per sequence.
// `kv_dtype` (default: act_dtype) sizes the KV blocks.
CachePlan plan_cache_for_budget(const model::ModelConfig& config, size_t budget_bytes,
                                int64_t max_seqs, int64_t block_size, DType act_dtype,
                                std::optional<DType> kv_dtype = std::nullopt);
// Exactly enough for `max_seqs` sequences of at most `max_tokens` tokens each.
CachePlan plan_cache_for_tokens(const model::ModelConfig& config, int64_t max_seqs,
                                int64_t max_tokens, int64_t block_size, DType act_dtype);

// Admission (core/admission.h): throws with the figures when the plan's state and KV bytes do
// not fit in what `device` (host memory or the CUDA device) has free now. Returns `plan`.
const CachePlan& admit_cache(const CachePlan& plan, Device device);

// The state pool and KV pool of one run, allocated on `device` once admit_cache passed.
struct ModelCache {
  ModelCache(const model::ModelConfig& config, const CachePlan& plan, Device device)
      : ModelCache(config, plan, plan.act_dtype, device) {}
  // `kv_dtype`: the KV cache's dtype (the activation dtype, or e4m3 for --kv-cache-dtype fp8).
  ModelCache(const model::ModelConfig& config, const CachePlan& plan, DType kv_dtype,
             Device device)
      : mamba(config, admit_cache(plan, device).state_slots, plan.act_dtype, device),
        kv(config, plan.num_blocks, plan.block_size, kv_dtype, device) {}
  MambaStatePool mamba;
  KvBlockPool kv;
};

}  // namespace strata::cache
