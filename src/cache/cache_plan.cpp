#include "cache/cache_plan.h"

#include "core/admission.h"
#include "core/check.h"

namespace strata::cache {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

CachePlan plan_cache_for_budget(const model::ModelConfig& config, size_t budget_bytes,
                                int64_t max_seqs, int64_t block_size, DType act_dtype,
                                std::optional<DType> kv_dtype) {
  if (max_seqs < 1) fail("cache plan: max sequences must be positive, got {}", max_seqs);
  if (block_size < 1) fail("cache plan: block size must be positive, got {}", block_size);
  CachePlan p;
  p.state_slots = max_seqs;
  p.block_size = block_size;
  p.act_dtype = act_dtype;
  p.state_bytes = MambaStatePool::bytes_per_slot(config, act_dtype) * static_cast<size_t>(max_seqs);
  const size_t per_block =
      KvBlockPool::bytes_per_block(config, block_size, kv_dtype.value_or(act_dtype));
  const size_t min_bytes = p.state_bytes + per_block * static_cast<size_t>(max_seqs);
  if (budget_bytes < min_bytes)
    fail(
        "cache budget of {:.1f} MiB is too small: {} sequences need {:.1f} MiB of Mamba state and "
        "{:.1f} MiB for one KV block each",
        budget_bytes / kMiB, max_seqs, p.state_bytes / kMiB,
        per_block * static_cast<double>(max_seqs) / kMiB);
  p.num_blocks = per_block ? static_cast<int64_t>((budget_bytes - p.state_bytes) / per_block) : 0;
  p.kv_bytes = per_block * static_cast<size_t>(p.num_blocks);
  return p;
}

CachePlan plan_cache_for_tokens(const model::ModelConfig& config, int64_t max_seqs,
                                int64_t max_tokens, int64_t block_size, DType act_dtype) {
  if (max_seqs < 1) fail("cache plan: max sequences must be positive, got {}", max_seqs);
  if (max_tokens < 1) fail("cache plan: max tokens must be positive, got {}", max_tokens);
  if (block_size < 1) fail("cache plan: block size must be positive, got {}", block_size);
  CachePlan p;
  p.state_slots = max_seqs;
  p.block_size = block_size;
  p.act_dtype = act_dtype;
  p.state_bytes = MambaStatePool::bytes_per_slot(config, act_dtype) * static_cast<size_t>(max_seqs);
  const size_t per_block = KvBlockPool::bytes_per_block(config, block_size, act_dtype);
  const double blocks =
      per_block ? double(max_seqs) * double((max_tokens + block_size - 1) / block_size) : 0.0;
  // Checked in double first so an absurd request is refused with figures, not wrapped around.
  if (blocks * double(per_block) + double(p.state_bytes) > 0x1p62)
    fail("cache plan: {} sequences of {} tokens need {:.3g} bytes of cache", max_seqs, max_tokens,
         blocks * double(per_block) + double(p.state_bytes));
  p.num_blocks = static_cast<int64_t>(blocks);
  p.kv_bytes = per_block * static_cast<size_t>(p.num_blocks);
  return p;
}

const CachePlan& admit_cache(const CachePlan& plan, Device device) {
  ResourceNeed need;
  const uint64_t bytes = uint64_t{plan.state_bytes} + uint64_t{plan.kv_bytes};
  (device == Device::Host ? need.host_bytes : need.device_bytes) = bytes;
  check_fits(need, fmt::format("the cache ({} state slots, {} KV blocks of {} tokens)",
                               plan.state_slots, plan.num_blocks, plan.block_size));
  return plan;
}

}  // namespace strata::cache
