// Batched decode benchmark (`strata bench --batch 1,8,64,256`): B sequences, each prefilled with
// a short prompt, then timed decode steps of B tokens (one per sequence: the step input built
// and uploaded, the forward with last-token logits; no sampling). Each step's time is set
// against its roofline: the larger of the bytes it must touch over the read ceiling and its
// matmul FLOPs over the tensor-core peaks. Bytes: the dense weights once, the experts its
// tokens route to (the expected number of distinct experts under uniform routing,
// E (1 - (1 - k/E)^B) per layer), B times the Mamba state read and written, and B times the KV
// read at the mean context.
#pragma once

#include <cstdint>
#include <vector>

#include "model/nemotron_h/model.h"

namespace strata::bench {

struct BatchDecodeOptions {
  std::vector<int64_t> batches = {1, 8, 64, 256};
  int64_t prompt_len = 16;
  int64_t steps = 16;   // decode steps per timed repeat
  int64_t repeats = 3;  // the median is reported
  int64_t warmup = 2;
  double ceiling_bytes_per_s = 4.57e12;   // measured read ceiling (spec/performance.md 9)
  double bf16_flops_per_s = 790e12;       // measured dense bf16 (f32 weights count here too)
  double fp8_flops_per_s = 1497e12;       // measured cuBLASLt FP8 8192^3
};

struct BatchDecodeRow {
  int64_t batch = 0;
  double ms_per_step = 0;  // median
  double tokens_per_s = 0;
  double bytes = 0;        // the step's minimum bytes
  double flops_ms = 0;     // matmul FLOPs at the peaks, ms
  double bytes_ms = 0;     // bytes at the ceiling, ms
  double fraction = 0;     // max(bytes_ms, flops_ms) / ms_per_step
  std::vector<double> repeat_ms;
};

std::vector<BatchDecodeRow> run_batch_decode_bench(model::NemotronHModel& m, Device device,
                                                   const BatchDecodeOptions& o);

}  // namespace strata::bench
