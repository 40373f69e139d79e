#include "engine/sampling_params.h"

#include <cmath>

#include "core/check.h"

namespace strata::engine {

void SamplingParams::validate() const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature))
    fail("temperature must be a finite number >= 0, got {}", temperature);
  if (top_k < 0) fail("top_k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p > 0.f && top_p <= 1.f)) fail("top_p must be in (0, 1], got {}", top_p);
  if (max_tokens < 1) fail("max_tokens must be >= 1, got {}", max_tokens);
}

ops::SamplingRow SamplingParams::row(uint64_t step) const {
  ops::SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.seed = seed;
  r.step = step;
  return r;
}

}  // namespace strata::engine
