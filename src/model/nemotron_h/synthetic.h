// Synthetic weights of any configuration (vLLM's `--load-format dummy`): random tensors of the
// official checkpoint layout (spec 2.1: `backbone.` prefix, one tensor per expert, f32 A_log / D /
// e_score_correction_bias, everything else in `dtype`; with `fp8`, the selective FP8 layout of
// spec 2.2) at realistic scales, so logits spread and greedy decoding is not a sea of ties. Used
// by tests, the demo-model generator, `strata make-checkpoint` and performance runs of the preset
// sizes. The recipes and scale rules are in synthetic_plan.h.
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
  // ModelOpt FP8 layout (fp8_layout.h): quantized linears stored e4m3 with weight_scale and
  // input_scale tensors; everything else in `dtype`.
  bool fp8 = false;
};

TensorMapSource make_synthetic_weights(const ModelConfig& config, const SyntheticOptions& options);

// Deterministic, platform-independent random numbers (splitmix64 + Box-Muller) for tests.
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
