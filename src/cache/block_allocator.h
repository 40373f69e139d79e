// Ids of cache resources, without the bytes (DESIGN principle 5: the scheduler owns lifetimes,
// the model owns what the bytes mean). Pure host code, no tensors:
//   BlockAllocator  paged-KV block ids with reference counts: a block may be read by several
//                   sequences at once (the prompt blocks of n > 1 completions now, prefix-cache
//                   hits later) and returns to the free list when its last reader lets go
//   SlotAllocator   Mamba state slot ids (one per live sequence, never shared)
//   BlockTable      the blocks of one sequence, in position order
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace strata::cache {

class BlockAllocator {
 public:
  // Throws strata::Error on a negative count, a non-positive block size, or a pool whose flat
  // slot ids (block * block_size + offset) overflow i32.
  BlockAllocator(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_blocks() - num_free(); }
  // Blocks needed to hold `num_tokens` positions.
  int64_t blocks_for(int64_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  // All-or-nothing: appends n fresh blocks (reference count 1) to *out and returns true, or
  // changes nothing and returns false when fewer than n are free.
  bool allocate(int64_t n, std::vector<int32_t>* out);
  // One more reader of a block in use (a block shared read-only).
  void share(int32_t block);
  // One reader less; the block is free again when none is left. Releasing a block that is not
  // in use is a programming error (throws).
  void release(int32_t block);
  void release(const std::vector<int32_t>& blocks);

  int32_t ref_count(int32_t block) const;  // 0 = free
  bool in_use(int32_t block) const { return ref_count(block) > 0; }

  // Prefix caching (a later issue) goes here: a full block's content hash, hash(parent block's
  // hash, the block's token ids), kept per block id with a map hash -> block, so that a new
  // sequence whose prompt starts with the same full blocks share()s them instead of computing
  // them. A freed block with a hash would then stay findable (an LRU of evictable blocks)
  // until allocate() reuses it, and hybrid models also need the Mamba state snapshot taken at
  // that block boundary (spec nemotron_h.md 4.3) before a hit is usable.

 private:
  int64_t block_size_;
  std::vector<int32_t> ref_;   // [num_blocks] readers of each block
  std::vector<int32_t> free_;  // a stack: block 0 is handed out first
};

class SlotAllocator {
 public:
  explicit SlotAllocator(int64_t num_slots);

  int64_t num_slots() const { return static_cast<int64_t>(in_use_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_slots() - num_free(); }

  // A free slot id, or nullopt when all are in use. The slot's bytes are NOT cleared here: the
  // first chunk of a sequence runs with has_initial = 0 (num_computed == 0), so the kernels
  // start from zero state and overwrite the slot; whatever a previous tenant left is never read.
  std::optional<int32_t> allocate();
  // Returns a slot; freeing a slot that is not in use is a programming error (throws).
  void release(int32_t slot);
  bool in_use(int32_t slot) const;

 private:
  std::vector<bool> in_use_;
  std::vector<int32_t> free_;  // a stack: slot 0 first, then the most recently freed
};

class KvBlockPool;

// The blocks of one sequence, in position order: block j holds positions
// [j * block_size, (j + 1) * block_size) in every attention layer's cache.
class BlockTable {
 public:
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Tokens the table can hold with its current blocks.
  int64_t capacity(int64_t block_size) const { return num_blocks() * block_size; }
  // Flat cache slot of position `pos`: block * block_size + offset (kv_cache_write's slot_mapping).
  int32_t slot(int64_t pos, int64_t block_size) const;

  // Grows the table to hold `num_tokens` positions; false (and unchanged) when the allocator
  // lacks blocks.
  bool ensure(BlockAllocator& alloc, int64_t num_tokens);
  // Blocks ensure() would have to allocate to hold `num_tokens` positions.
  int64_t blocks_missing(const BlockAllocator& alloc, int64_t num_tokens) const;
  // Appends the first `n` blocks of `from` as shared, read-only blocks (one more reader each).
  void share_prefix(const BlockTable& from, int64_t n, BlockAllocator& alloc);
  // Lets go of every block (each freed when this was its last reader); the table is empty.
  void release(BlockAllocator& alloc);

  // The same over a KvBlockPool's own allocator (single-sequence callers); a pool without
  // attention layers needs no blocks: ensure() is always true. Defined in kv_block_pool.cpp.
  bool ensure(KvBlockPool& pool, int64_t num_tokens);
  void release(KvBlockPool& pool);

 private:
  std::vector<int32_t> blocks_;
};

}  // namespace strata::cache
