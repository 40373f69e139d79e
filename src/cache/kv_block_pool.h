// Paged KV cache for the attention layers (spec 4.4): per attention layer one K and one V
// tensor [num_blocks, block_size, n_kv, head_dim] in the activation dtype, and a BlockAllocator
// over its block ids for single-sequence callers (the engine's scheduler keeps its own
// allocator and uses only the tensors); BlockTable (cache/block_allocator.h) maps a sequence's
// token position to (block, offset). Blocks are shared by every attention layer: block b of a
// sequence holds its tokens [b*block_size, (b+1)*block_size) in each layer's cache.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/block_allocator.h"
#include "core/tensor.h"
#include "model/nemotron_h/config.h"

namespace strata::cache {

class KvBlockPool {
 public:
  KvBlockPool(const model::ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype,
              Device device);

  // Bytes of one block over every attention layer (K and V).
  static size_t bytes_per_block(const model::ModelConfig& config, int64_t block_size, DType dtype);

  int64_t num_blocks() const { return allocator_.num_blocks(); }
  int64_t block_size() const { return allocator_.block_size(); }
  DType dtype() const { return dtype_; }
  int64_t num_free() const { return allocator_.num_free(); }
  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  size_t bytes() const;

  // All-or-nothing: appends n free blocks to *out and returns true, or changes nothing and
  // returns false when fewer than n are free.
  bool allocate(int64_t n, std::vector<int32_t>* out);
  // Returns blocks; a block that is not in use is a programming error (throws).
  void free(const std::vector<int32_t>& blocks);
  BlockAllocator& allocator() { return allocator_; }

  // Per attention layer (index among attention layers, ModelConfig::kind_index).
  Tensor& k_cache(int64_t attn_layer);  // [num_blocks, block_size, n_kv, hd]
  Tensor& v_cache(int64_t attn_layer);

 private:
  BlockAllocator allocator_;
  DType dtype_;
  std::vector<Tensor> k_, v_;
};

}  // namespace strata::cache
