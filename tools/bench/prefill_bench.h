// Prefill benchmark (`strata bench prefill`): one forward step that prefills B fresh prompts of
// L tokens each (B sequences, B * L tokens, last-token logits), timed per prompt length; with
// profiling, the per-op device time of one such step. Runs the model's step forward directly
// (StepInput over B sequences); the engine's executor is not involved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/op_profile.h"
#include "model/nemotron_h/model.h"

namespace strata::bench {

struct PrefillOptions {
  std::vector<int64_t> prompt_lens = {128, 512, 2048, 8192};
  int64_t batch = 1;    // prompts per step
  int64_t repeats = 5;  // timed steps per length (the median is reported)
  int64_t warmup = 1;   // untimed steps per length first
  bool profile_ops = false;
};

struct PrefillRow {
  int64_t prompt_len = 0, batch = 0;
  double ms = 0;  // median time of one step (all B prompts)
  double tokens_per_s = 0;
  std::vector<double> repeat_ms;
  OpProfile profile;  // steps == 0 when not profiled
};

std::vector<PrefillRow> run_prefill_bench(model::NemotronHModel& m, Device device,
                                          const PrefillOptions& o);

}  // namespace strata::bench
