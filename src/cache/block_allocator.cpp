#include "cache/block_allocator.h"

#include "core/check.h"

namespace strata::cache {

BlockAllocator::BlockAllocator(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  if (block_size < 1) fail("KV cache: block size must be positive, got {}", block_size);
  if (num_blocks < 0) fail("KV cache: negative block count {}", num_blocks);
  if (num_blocks > INT32_MAX / block_size)
    fail("KV cache: {} blocks of {} tokens overflow the i32 slot mapping", num_blocks, block_size);
  ref_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b)
    free_.push_back(static_cast<int32_t>(b));
}

bool BlockAllocator::allocate(int64_t n, std::vector<int32_t>* out) {
  STRATA_CHECK_GE(n, 0);
  if (n > num_free()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    ref_[static_cast<size_t>(b)] = 1;
    out->push_back(b);
  }
  return true;
}

int32_t BlockAllocator::ref_count(int32_t b) const {
  STRATA_CHECK(b >= 0 && b < num_blocks(), "KV block {} outside the pool [0, {})", b, num_blocks());
  return ref_[static_cast<size_t>(b)];
}

void BlockAllocator::share(int32_t b) {
  STRATA_CHECK(ref_count(b) > 0, "sharing KV block {} which is not in use", b);
  ++ref_[static_cast<size_t>(b)];
}

void BlockAllocator::release(int32_t b) {
  STRATA_CHECK(b >= 0 && b < num_blocks() && ref_[static_cast<size_t>(b)] > 0,
               "freeing KV block {} which is not in use", b);
  if (--ref_[static_cast<size_t>(b)] == 0) free_.push_back(b);
}

void BlockAllocator::release(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks)
    release(b);
}

SlotAllocator::SlotAllocator(int64_t num_slots) {
  if (num_slots < 0) fail("Mamba state: negative slot count {}", num_slots);
  if (num_slots > INT32_MAX) fail("Mamba state: {} slots overflow i32 slot ids", num_slots);
  in_use_.assign(static_cast<size_t>(num_slots), false);
  for (int64_t s = num_slots - 1; s >= 0; --s)
    free_.push_back(static_cast<int32_t>(s));
}

std::optional<int32_t> SlotAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t s = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(s)] = true;
  return s;
}

bool SlotAllocator::in_use(int32_t s) const {
  return s >= 0 && s < num_slots() && in_use_[static_cast<size_t>(s)];
}

void SlotAllocator::release(int32_t s) {
  STRATA_CHECK(in_use(s), "freeing Mamba slot {} which is not in use", s);
  in_use_[static_cast<size_t>(s)] = false;
  free_.push_back(s);
}

int32_t BlockTable::slot(int64_t pos, int64_t block_size) const {
  const int64_t b = pos / block_size;
  STRATA_CHECK(pos >= 0 && b < num_blocks(), "position {} beyond the block table ({} blocks)", pos,
               blocks_.size());
  return static_cast<int32_t>(blocks_[static_cast<size_t>(b)] * block_size + pos % block_size);
}

int64_t BlockTable::blocks_missing(const BlockAllocator& alloc, int64_t num_tokens) const {
  const int64_t need = alloc.blocks_for(num_tokens);
  return need > num_blocks() ? need - num_blocks() : 0;
}

bool BlockTable::ensure(BlockAllocator& alloc, int64_t num_tokens) {
  return alloc.allocate(blocks_missing(alloc, num_tokens), &blocks_);
}

void BlockTable::share_prefix(const BlockTable& from, int64_t n, BlockAllocator& alloc) {
  STRATA_CHECK(n >= 0 && n <= from.num_blocks(), "sharing {} of {} blocks", n, from.num_blocks());
  for (int64_t j = 0; j < n; ++j) {
    const int32_t b = from.blocks_[static_cast<size_t>(j)];
    alloc.share(b);
    blocks_.push_back(b);
  }
}

void BlockTable::release(BlockAllocator& alloc) {
  alloc.release(blocks_);
  blocks_.clear();
}

}  // namespace strata::cache
