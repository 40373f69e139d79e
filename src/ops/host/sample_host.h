// The host sampler's filter, exposed for the tests that compare it with a float64 reference.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace strata::ops::host {

// The tokens a non-greedy row draws from, given its processed logits z (maximum m): those
// min_p keeps, then (sorted path) the first top_k by z descending (ties by lower id), then the
// shortest prefix reaching top_p of their mass. Fills `order` with candidates; the first
// (returned) count of them are kept: in id order on the race path, by z on the sorted path.
int64_t sample_kept_tokens(const std::vector<float>& z, float m, const SamplingRow& r,
                           std::vector<int32_t>& order);

}  // namespace strata::ops::host
