// Launchers of the indexed copies: the embedding gather and the paged KV-cache write.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// out[t, :] = table[ids[t], :]; an id outside [0, V) writes a zero row and counts an index error.
void launch_embedding(const Mat& table, const Vec& ids, const Mat& out, int* index_errors,
                      void* stream);

// Rows k[t], v[t] go to cache position slot_mapping[t] (block = slot / block_size); negative
// slots are skipped; slots past the cache count an index error. An e4m3 cache (fp8) stores
// e4m3(k / k_scale) and e4m3(v / v_scale), saturated to +-448.
struct KvWriteLaunch {
  Mat k, v;                 // [T, W] act, W = n_kv * head_dim
  void* k_cache = nullptr;  // [num_blocks, block_size, W] (n_kv and head_dim flattened)
  void* v_cache = nullptr;
  int64_t num_blocks = 0, block_size = 0;
  Vec slot_mapping;  // [T] i32
  bool fp8 = false;  // e4m3 caches
  float k_scale = 1.f, v_scale = 1.f;
};
void launch_kv_cache_write(const KvWriteLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
