// Launchers of causal GQA attention over the paged KV cache: the general kernel family (prefill
// and decode, f32 and bf16, any head_dim 1..256; attention.cu), flash attention on the tensor
// cores for prefill and mixed steps (attention_flash.cu) and the bf16 decode kernel of the real
// models' shapes (tensor cores, fused split combine; attention_decode.cu).
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

constexpr int64_t kAttentionMaxHeadDim = 256;

struct AttentionLaunch {
  Mat q;                          // [T, n_heads * hd] act
  const void* k_cache = nullptr;  // [num_blocks, block_size, n_kv, hd] act (or e4m3: fp8_cache)
  const void* v_cache = nullptr;
  bool fp8_cache = false;              // e4m3 caches, read as code * k_scale / v_scale
  float k_scale = 1.f, v_scale = 1.f;  // (general kernel family only)
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

// ---- general kernel family (attention.cu) ----

bool attention_head_dim_supported(int64_t head_dim);  // 1..kAttentionMaxHeadDim
// Splits for a decode step: enough blocks to fill `sms` multiprocessors twice over.
int64_t attention_decode_splits(const AttentionLaunch& p, int sms);
int64_t attention_partials_floats(const AttentionLaunch& p);
void launch_attention(const AttentionLaunch& p, int* index_errors, void* stream);

// Split-K override for tests and tuning (process-wide, every attention kernel): 0 = each
// kernel's heuristic, 1 = never split, n > 1 = split every launch that can into n parts (capped
// by the kernel's limits). STRATA_ATTENTION_SPLITS sets the initial value.
void set_attention_splits_override(int64_t n);
int64_t attention_splits_override();

// ---- flash attention for prefill, mixed and FP8-cache decode steps (attention_flash.cu) ----
// bf16 q/out, bf16 or e4m3 caches, head_dim 64 or 128, GQA group of at most 64 query heads; q
// and out rows 4-byte aligned, caches 16-byte aligned. Tensor cores. Split-K over the context
// (n_splits > 1, partials sized by attention_flash_partials_floats) when the grid would leave
// multiprocessors idle: decode rows and short chunks at long contexts.
constexpr int64_t kFlashMaxSplits = 32;
constexpr int64_t kFlashMaxGroup = 64;
constexpr int64_t kFlashMinSplitKeys = 256;  // keys of a full-width context per split, at least
constexpr int64_t kFlashMinPrefillSplitKeys = 2048;  // the same when a sequence has several queries
bool attention_flash_shape_supported(int64_t head_dim, int64_t group);
// Splits for this launch: 1 when the unsplit grid already fills `sms` multiprocessors.
int64_t attention_flash_splits(const AttentionLaunch& p, int sms);
int64_t attention_flash_partials_floats(const AttentionLaunch& p);
void launch_attention_flash(const AttentionLaunch& p, int* index_errors, void* stream);

// ---- bf16 decode kernel (attention_decode.cu) ----
// One query per sequence, bf16 q/K/V/out, head_dim 64 or 128, GQA group of at most 16 query
// heads (one m16 tensor-core tile), q rows and K/V rows 16-byte aligned. A block serves one
// (sequence, kv head, split of the context); the context is split so that the grid fills the
// GPU once (grid sizes depend only on the batch and the block-table width, so a CUDA graph
// captured once stays valid for every context length). Each split writes its partial (max, sum,
// output); the last block of a (sequence, kv head) to finish merges them and writes the output.

constexpr int kDecodeMaxGroup = 16;
// A split's page-table entries are staged in shared memory: at most this many per split.
constexpr int64_t kDecodeMaxPagesPerSplit = 2048;
// The split combine counters live in one device buffer owned by the launcher (zeroed once,
// left zero by every launch): B * n_kv_heads must fit when the context is split.
constexpr int64_t kDecodeCounters = 4096;

struct DecodeAttentionPlan {
  int64_t splits = 1;     // splits of the context per (sequence, kv head)
  int64_t split_len = 0;  // keys per split (a multiple of 16)
};

bool attention_decode_shape_supported(int64_t head_dim, int64_t group);
// min_split_keys: each split streams at least this many keys of a full-width context (>= 16).
DecodeAttentionPlan plan_attention_decode(const AttentionLaunch& p, int sms,
                                          int64_t min_split_keys);
// Partials of a split decode: floats for (max, sum) and output rows of every split.
int64_t attention_decode_partials_floats(const AttentionLaunch& p, const DecodeAttentionPlan& plan);
// Ints in a split decode's ticket buffer (attention_kernels.cpp keeps one per device context).
int64_t attention_decode_ticket_count();
// `partials` (p.partials) and `tickets` are needed when plan.splits > 1; plan.splits == 0
// means no plan.
void launch_attention_decode(const AttentionLaunch& p, const DecodeAttentionPlan& plan,
                             int* tickets, int* index_errors, void* stream);

}  // namespace strata::cuda
