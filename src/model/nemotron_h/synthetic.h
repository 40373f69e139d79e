// Synthetic weights of any configuration (vLLM's `--load-format dummy`): random tensors of the
// official checkpoint layout (spec 2.1: `backbone.` prefix, one tensor per expert, f32 A_log / D /
// e_score_correction_bias, everything else in `dtype`) at realistic scales, so logits spread
// and greedy decoding is not a sea of ties. Used by tests, the demo-model generator and
// performance runs of the preset sizes.
#pragma once

#include <cstdint>

#include "model/nemotron_h/config.h"
#include "model/nemotron_h/tensor_source.h"

namespace strata::model {

struct SyntheticOptions {
  uint64_t seed = 1;
  DType dtype = DType::F32;  // bf16 or f32 storage of everything but A_log, D, correction bias
  // Scale of the projections that write into the residual stream (out_proj, o_proj, down_proj);
  // 0.1 keeps deep random models well conditioned (spec 9.1).
  float residual_damping = 0.1f;
};

TensorMapSource make_synthetic_weights(const ModelConfig& config, const SyntheticOptions& options);

// Deterministic, platform-independent random numbers (splitmix64 + Box-Muller).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();
 private:
  uint64_t s_;
};

}  // namespace strata::model
