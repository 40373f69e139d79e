// Per-request sampling parameters (the subset of vLLM's SamplingParams that a single-sequence
// generation needs) and their validation.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace strata::engine {

struct SamplingParams {
  float temperature = 1.f;  // 0 = greedy
  int32_t top_k = 0;        // 0 = off
  float top_p = 1.f;        // 1 = off
  uint64_t seed = 0;
  int64_t max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // EOS ids from the model, plus any the caller adds

  // Throws strata::Error naming the parameter when out of range.
  void validate() const;
  // The sample op's row for the token at index `step` of the generation.
  ops::SamplingRow row(uint64_t step) const;
};

}  // namespace strata::engine
