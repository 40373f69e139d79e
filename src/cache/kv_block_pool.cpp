#include "cache/kv_block_pool.h"

#include "core/check.h"

namespace strata::cache {

size_t KvBlockPool::bytes_per_block(const model::ModelConfig& c, int64_t block_size, DType dtype) {
  return static_cast<size_t>(c.num_attention) * 2 *
         static_cast<size_t>(block_size * c.num_key_value_heads * c.head_dim) * dtype_size(dtype);
}

KvBlockPool::KvBlockPool(const model::ModelConfig& config, int64_t num_blocks, int64_t block_size,
                         DType dtype, Device device)
    : allocator_(num_blocks, block_size), dtype_(dtype) {
  // allocator_ has checked the counts before any tensor exists.
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t l = 0; l < config.num_attention; ++l) {
    // Unwritten cache rows are never read (attention reads positions < context length), so the
    // cache needs no zero fill.
    k_.push_back(Tensor::empty(shape, dtype, device));
    v_.push_back(Tensor::empty(shape, dtype, device));
  }
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
  return allocator_.allocate(n, out);
}

void KvBlockPool::free(const std::vector<int32_t>& blocks) {
  allocator_.release(blocks);
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
  return ensure(pool.allocator(), num_tokens);
}

void BlockTable::release(KvBlockPool& pool) {
  release(pool.allocator());
}

}  // namespace strata::cache
