// Batched decode benchmark (`strata bench --batch 1,8,64,256`): B sequences, each prefilled with
// a short prompt, then timed decode steps of B tokens, two ways: the step the engine runs
// (Executor::step with greedy rows: on CUDA the replay of the batch-size bucket's graph,
// captured during warm-up, the greedy sample and the ids' copy to the host) and the eager
// forward (the step input built and uploaded, the forward with last-token logits, no sampling;
// the only one with `eager_only`). The engine step's time is set against its roofline: the
// larger of the bytes it must touch over the read ceiling and its matmul FLOPs over the
// tensor-core peaks. Bytes: the dense weights once, the experts its
// tokens route to (the expected number of distinct experts under uniform routing,
// E (1 - (1 - k/E)^B) per layer), B times the Mamba state read and written, and B times the KV
// read at the mean context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/op_profile.h"
#include "model/nemotron_h/model.h"

namespace strata::bench {

struct BatchDecodeOptions {
  std::vector<int64_t> batches = {1, 8, 64, 256};
  int64_t prompt_len = 16;
  int64_t steps = 16;   // decode steps per timed repeat
  int64_t repeats = 3;  // the median is reported
  int64_t warmup = 2;
  bool eager_only = false;  // no engine-step (graph) column
  int64_t profile_steps = 0;  // > 0: also the per-op device time of B-token eager steps (CUDA)
  double ceiling_bytes_per_s = 4.57e12;   // measured read ceiling (spec/performance.md 9)
  double bf16_flops_per_s = 790e12;       // measured dense bf16 (f32 weights count here too)
  double fp8_flops_per_s = 1497e12;       // measured cuBLASLt FP8 8192^3
};

struct BatchDecodeRow {
  int64_t batch = 0;
  double eager_ms = 0;          // eager forward, median ms per step
  std::vector<double> eager_repeat_ms;
  double step_ms = 0;           // the engine's step, median ms per step (0: not run)
  std::string step_mode;        // "graph" (CUDA replay) or "eager" (host; capture failed)
  std::string step_note;        // why the step did not replay a graph
  std::vector<double> step_repeat_ms;
  // The step the roofline fraction is taken from: the engine step when it ran, else eager.
  double ms_per_step = 0;
  std::string roofline_of;      // "graph", "eager step" or "eager forward"
  double tokens_per_s = 0;
  double bytes = 0;        // the step's minimum bytes
  double flops_ms = 0;     // matmul FLOPs at the peaks, ms
  double bytes_ms = 0;     // bytes at the ceiling, ms
  double fraction = 0;     // max(bytes_ms, flops_ms) / ms_per_step
  double eager_fraction = 0;  // the same over eager_ms
  OpProfile profile;       // steps == 0 when not profiled
};

std::vector<BatchDecodeRow> run_batch_decode_bench(model::NemotronHModel& m, Device device,
                                                   const BatchDecodeOptions& o);

}  // namespace strata::bench
