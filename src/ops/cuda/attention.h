// Launcher of causal GQA attention over the paged KV cache (prefill and decode).
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

struct AttentionLaunch {
  Mat q;                          // [T, n_heads * hd] act
  const void* k_cache = nullptr;  // [num_blocks, block_size, n_kv, hd] act
  const void* v_cache = nullptr;
  int64_t num_blocks = 0, block_size = 0;
  Mat block_tables;                // [B, max_blocks] i32
  Vec cu_seqlens_q, context_lens;  // i32 [B+1], [B]
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0, max_q_len = 0;
  float scale = 1.f;
  Mat out;  // [T, n_heads * hd] act
  // Split-K over the context (decode): n_splits > 1 needs `partials`, sized by
  // attention_partials_floats, and combines them in a second kernel.
  int64_t n_splits = 1;
  float* partials = nullptr;
};

bool attention_head_dim_supported(int64_t head_dim);
// Splits for a decode step: enough blocks to fill `sms` multiprocessors twice over.
int64_t attention_decode_splits(const AttentionLaunch& p, int sms);
int64_t attention_partials_floats(const AttentionLaunch& p);
void launch_attention(const AttentionLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
