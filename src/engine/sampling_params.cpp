#include "engine/sampling_params.h"

#include <cmath>

#include "core/check.h"

namespace strata::engine {

namespace {
bool finite(float v) { return std::isfinite(v); }
}  // namespace

void SamplingParams::validate(int64_t vocab_size, int32_t max_logprobs) const {
  if (n < 1 || n > 128) fail("n must be in [1, 128], got {}", n);
  if (!finite(temperature) || temperature < 0.f)
    fail("temperature must be a finite number >= 0, got {}", temperature);
  if (top_k < 0) fail("top_k must be >= 0 (0 = off), got {}", top_k);
  if (!finite(top_p) || !(top_p > 0.f && top_p <= 1.f)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!finite(min_p) || min_p < 0.f || min_p > 1.f) fail("min_p must be in [0, 1], got {}", min_p);
  if (!finite(presence_penalty) || presence_penalty < -2.f || presence_penalty > 2.f)
    fail("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!finite(frequency_penalty) || frequency_penalty < -2.f || frequency_penalty > 2.f)
    fail("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!finite(repetition_penalty) || repetition_penalty <= 0.f || repetition_penalty > 100.f)
    fail("repetition_penalty must be in (0, 100], got {}", repetition_penalty);
  if (max_tokens < 1) fail("max_tokens must be >= 1, got {}", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens)
    fail("min_tokens must be in [0, max_tokens = {}], got {}", max_tokens, min_tokens);
  if (logprobs < -1 || logprobs > max_logprobs)
    fail("logprobs must be in [0, {}], got {}", max_logprobs, logprobs);
  if (prompt_logprobs >= 0) fail("prompt_logprobs is not supported by strata");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size)
      fail("logit_bias: token id {} is outside the vocabulary [0, {})", id, vocab_size);
    if (!finite(bias) || bias < -100.f || bias > 100.f)
      fail("logit_bias: the bias of token {} must be in [-100, 100], got {}", id, bias);
  }
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size)
      fail("stop_token_ids: {} is outside the vocabulary [0, {})", id, vocab_size);
  for (const std::string& s : stop)
    if (s.empty()) fail("stop: a stop string must not be empty");
}

ops::SamplingRow SamplingParams::row(uint64_t seed_value, uint64_t step) const {
  ops::SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.seed = seed_value;
  r.step = step;
  r.min_p = min_p;
  r.presence_penalty = presence_penalty;
  r.frequency_penalty = frequency_penalty;
  r.repetition_penalty = repetition_penalty;
  r.num_logprobs = logprobs;
  return r;
}

}  // namespace strata::engine
