// Paged KV cache for the attention layers (spec 4.4): per attention layer one K and one V
// tensor [num_blocks, block_size, n_kv, head_dim] in the activation dtype, a free-block list,
// and per-sequence block tables mapping a token position to (block, offset). Blocks are shared
// by every attention layer: block b of a sequence holds its tokens [b*block_size, (b+1)*block_size)
// in each layer's cache.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/nemotron_h/config.h"

namespace strata::cache {

class KvBlockPool {
 public:
  KvBlockPool(const model::ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype,
              Device device);

  // Bytes of one block over every attention layer (K and V).
  static size_t bytes_per_block(const model::ModelConfig& config, int64_t block_size, DType dtype);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  size_t bytes() const;

  // All-or-nothing: appends n free blocks to *out and returns true, or changes nothing and
  // returns false when fewer than n are free.
  bool allocate(int64_t n, std::vector<int32_t>* out);
  // Returns blocks; a block that is not in use is a programming error (throws).
  void free(const std::vector<int32_t>& blocks);

  // Per attention layer (index among attention layers, ModelConfig::kind_index).
  Tensor& k_cache(int64_t attn_layer);  // [num_blocks, block_size, n_kv, hd]
  Tensor& v_cache(int64_t attn_layer);

 private:
  int64_t num_blocks_, block_size_;
  DType dtype_;
  std::vector<Tensor> k_, v_;
  std::vector<int32_t> free_;
  std::vector<bool> in_use_;
};

// The blocks of one sequence, in position order.
class BlockTable {
 public:
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // Tokens the table can hold with its current blocks.
  int64_t capacity(int64_t block_size) const {
    return static_cast<int64_t>(blocks_.size()) * block_size;
  }
  // Grows the table to hold `num_tokens` positions; false (and unchanged) when the pool lacks
  // blocks. A pool without attention layers needs no blocks: always true.
  bool ensure(KvBlockPool& pool, int64_t num_tokens);
  // Flat cache slot of position `pos`: block * block_size + offset (kv_cache_write's slot_mapping).
  int32_t slot(int64_t pos, int64_t block_size) const;
  void release(KvBlockPool& pool);

 private:
  std::vector<int32_t> blocks_;
};

}  // namespace strata::cache
