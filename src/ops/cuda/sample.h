// Launcher of the device sampler (greedy argmax; temperature, top-k, top-p and a seeded draw
// in the host sampler's token order, so host and device pick the same token for a row).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/device_views.h"

namespace strata::cuda {

// Rows per launch: their parameters travel as a kernel argument (no copy to the device).
constexpr int kSampleRowsPerLaunch = 64;

// One row's parameters (ops::SamplingRow's fields; this header stays free of ops.h, whose fmt
// includes do not build next to CUB under nvcc).
struct SampleRow {
  float temperature = 0.f;
  int32_t top_k = 0;
  float top_p = 1.f;
  uint64_t seed = 0, step = 0;
};

struct SampleRowsParam {
  SampleRow rows[kSampleRowsPerLaunch];
};

struct SampleLaunch {
  Mat logits;               // [B, V] f32
  int32_t* ids = nullptr;   // [B]
  bool any_random = false;  // some row has temperature > 0: the sorted path runs
  // Sorted path scratch (sample_scratch_bytes): keys and token ids sorted by logit, offsets,
  // and CUB's temporary storage.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

size_t sample_scratch_bytes(int64_t rows, int64_t vocab);
void launch_sample(const SampleLaunch& p, const SampleRow* rows, int* index_errors, void* stream);

}  // namespace strata::cuda
