// Launcher of the device sampler (ops/cuda/sample.cu): the host sampler's rules with the same
// arithmetic (ops/sampling_math.h), so host and device pick the same token for a row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// Rows per launch: their parameters travel as a kernel argument (12 KiB: CUDA 12.1+ takes up to
// 32 KiB of parameters), so no upload and no synchronization precede the kernels, and one
// launch of 256 blocks fills the H200's 132 SMs. B = 1024 is 4 launches per kernel.
constexpr int kSampleRowsPerLaunch = 256;
// Sorted rows per sort chunk (and at most kSortElements logits in one chunk: 64 MiB of keys,
// ids and their sorted copies).
constexpr int kSortRowsPerChunk = 64;
constexpr int64_t kSortElements = int64_t{1} << 22;

// One row as the kernels read it (ops::SamplingRow, normalized by the registration; this
// header stays free of ops.h, whose fmt includes do not build next to CUB under nvcc).
struct SampleRow {
  float temperature = 0.f;  // > 0 on race and sorted rows
  float top_p = 1.f;
  float log_min_p = 0.f;  // -inf = off
  float presence = 0.f, frequency = 0.f, repetition = 1.f;
  int32_t top_k = 0;          // 0 = off
  int32_t num_logprobs = -1;  // -1 = none
  int32_t path = 0;           // ops::SamplePath
  int32_t pad = 0;
  uint64_t key = 0;  // ops::sampling_bits(seed, step)
};

struct SampleRowsParam {
  SampleRow rows[kSampleRowsPerLaunch];
};

struct SortChunkParam {
  SampleRow rows[kSortRowsPerChunk];
  int32_t row[kSortRowsPerChunk];  // the batch row of each slot
};

struct SampleLaunch {
  Mat logits;  // [B, V] f32
  // Sparse entries (null offsets = none).
  const int32_t* entry_offsets = nullptr;
  const int32_t* entry_tokens = nullptr;
  const int32_t* entry_counts = nullptr;
  const int32_t* entry_in_prompt = nullptr;
  const float* entry_bias = nullptr;
  int32_t* ids = nullptr;            // [B]
  int32_t* nonfinite = nullptr;      // [B] or null (then flagged rows count index errors)
  float* sampled_logprob = nullptr;  // [B] or null
  int32_t* sampled_rank = nullptr;   // [B] or null
  int32_t* top_ids = nullptr;        // [B, top_width] or null
  float* top_logprobs = nullptr;     // [B, top_width] or null
  int64_t top_width = 0;
  const SampleRow* rows = nullptr;       // host array [B]
  const int32_t* sorted_rows = nullptr;  // host array: rows on the sorted path, ascending
  int64_t num_sorted = 0;
  bool any_logprobs = false;
  void* scratch = nullptr;  // sample_scratch_bytes
};

size_t sample_scratch_bytes(int64_t rows, int64_t vocab, int64_t num_sorted);
void launch_sample(const SampleLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
