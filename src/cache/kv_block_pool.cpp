#include "cache/kv_block_pool.h"

#include "core/check.h"

namespace strata::cache {

size_t KvBlockPool::bytes_per_block(const model::ModelConfig& c, int64_t block_size, DType dtype) {
  return static_cast<size_t>(c.num_attention) * 2 *
         static_cast<size_t>(block_size * c.num_key_value_heads * c.head_dim) * dtype_size(dtype);
}

KvBlockPool::KvBlockPool(const model::ModelConfig& config, int64_t num_blocks, int64_t block_size,
                         DType dtype, Device device)
    : num_blocks_(num_blocks), block_size_(block_size), dtype_(dtype) {
  if (block_size < 1) fail("KV cache: block size must be positive, got {}", block_size);
  if (num_blocks < 0) fail("KV cache: negative block count {}", num_blocks);
  if (num_blocks > INT32_MAX / block_size)
    fail("KV cache: {} blocks of {} tokens overflow the i32 slot mapping", num_blocks, block_size);
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t l = 0; l < config.num_attention; ++l) {
    // Unwritten cache rows are never read (attention reads positions < context length), so the
    // cache needs no zero fill.
    k_.push_back(Tensor::empty(shape, dtype, device));
    v_.push_back(Tensor::empty(shape, dtype, device));
  }
  in_use_.assign(static_cast<size_t>(num_blocks), false);
  for (int64_t b = num_blocks - 1; b >= 0; --b)
    free_.push_back(static_cast<int32_t>(b));
}

size_t KvBlockPool::bytes() const {
  size_t b = 0;
  for (const auto& t : k_)
    b += t.nbytes();
  for (const auto& t : v_)
    b += t.nbytes();
  return b;
}

bool KvBlockPool::allocate(int64_t n, std::vector<int32_t>* out) {
  STRATA_CHECK_GE(n, 0);
  if (n > num_free()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    in_use_[static_cast<size_t>(b)] = true;
    out->push_back(b);
  }
  return true;
}

void KvBlockPool::free(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks) {
    STRATA_CHECK(b >= 0 && b < num_blocks_ && in_use_[static_cast<size_t>(b)],
                 "freeing KV block {} which is not in use", b);
    in_use_[static_cast<size_t>(b)] = false;
    free_.push_back(b);
  }
}

Tensor& KvBlockPool::k_cache(int64_t l) {
  STRATA_CHECK(l >= 0 && l < num_layers(), "attention layer {} of {}", l, num_layers());
  return k_[static_cast<size_t>(l)];
}

Tensor& KvBlockPool::v_cache(int64_t l) {
  STRATA_CHECK(l >= 0 && l < num_layers(), "attention layer {} of {}", l, num_layers());
  return v_[static_cast<size_t>(l)];
}

bool BlockTable::ensure(KvBlockPool& pool, int64_t num_tokens) {
  if (pool.num_layers() == 0) return true;
  const int64_t have = static_cast<int64_t>(blocks_.size());
  const int64_t need = (num_tokens + pool.block_size() - 1) / pool.block_size();
  if (need <= have) return true;
  return pool.allocate(need - have, &blocks_);
}

int32_t BlockTable::slot(int64_t pos, int64_t block_size) const {
  const int64_t b = pos / block_size;
  STRATA_CHECK(pos >= 0 && b < static_cast<int64_t>(blocks_.size()),
               "position {} beyond the block table ({} blocks)", pos, blocks_.size());
  return static_cast<int32_t>(blocks_[static_cast<size_t>(b)] * block_size + pos % block_size);
}

void BlockTable::release(KvBlockPool& pool) {
  if (!blocks_.empty()) pool.free(blocks_);
  blocks_.clear();
}

}  // namespace strata::cache
