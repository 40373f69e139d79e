// Launcher of the device sampler (greedy argmax; temperature, top-k, top-p and a seeded draw
// in the host sampler's token order, so host and device pick the same token for a row).
#pragma once

#include <cstddef>

#include "ops/cuda/device_views.h"
#include "ops/ops.h"

namespace strata::cuda {

// Rows per launch: their parameters travel as a kernel argument (no copy to the device).
constexpr int kSampleRowsPerLaunch = 64;

struct SampleRowsParam {
  ops::SamplingRow rows[kSampleRowsPerLaunch];
};

struct SampleLaunch {
  Mat logits;            // [B, V] f32
  int32_t* ids = nullptr;  // [B]
  bool any_random = false;  // some row has temperature > 0: the sorted path runs
  // Sorted path scratch (sample_scratch_bytes): keys and token ids sorted by logit, offsets,
  // and CUB's temporary storage.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

size_t sample_scratch_bytes(int64_t rows, int64_t vocab);
void launch_sample(const SampleLaunch& p, const ops::SamplingRow* rows, int* index_errors, void* stream);

}  // namespace strata::cuda
