// Synthetic weights as a plan: one recipe per checkpoint tensor (name, shape, stored dtype,
// distribution, seed), in the official layout (spec 2.1; FP8 per spec 2.2 and fp8_layout.h).
// A recipe is materialized on the host (materialize_synthetic) or directly on the device
// (fill_synthetic_device, for `--load-format dummy`) with the same bits, one tensor at a time,
// so checkpoints of any size can be written shard by shard and device weights need no host copy.
//
// Scale rules (those of the golden fixtures, spec 9.1): linear weights at std 1/sqrt(fan_in),
// the projections that write into the residual stream (out_proj, o_proj, down_proj) damped by
// `residual_damping`; embeddings std 1; norms uniform in [0.9, 1.1); conv weights std
// 1/sqrt(K), conv bias std 0.1; dt_bias uniform [-6, -2.5) so softplus(dt + dt_bias) spreads over
// ~1e-3 .. 1e-1; A_log uniform [0, ln 8) (A in [-8, -1]); D uniform [0.5, 1.5); correction bias
// std 0.05.
//
// FP8 (options.fp8): a quantized linear stores e4m3(w / weight_scale) with weight_scale =
// bound / 448 (bound = the generator's exact largest |w|, so nothing saturates) and a static
// input_scale = expected activation amax / 448: 6 for inputs that are RMS-normalized (rms ~1,
// Gaussian-like: amax over a few thousand values ~4-6), 36 for down_proj inputs (relu² of such
// values). These are the scales a calibration of these random weights lands near.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::model {

enum class SynthKind : uint8_t { Symmetric, Uniform, Constant };

struct SyntheticTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;  // stored dtype: f32 | bf16 | f8e4m3
  SynthKind kind = SynthKind::Symmetric;
  uint64_t seed = 0;
  float k = 0.f;               // Symmetric: value = synth_centered * k
  float lo = 0.f, span = 0.f;  // Uniform: value in [lo, lo + span)
  float value = 0.f;           // Constant
  float fp8_inv_scale = 1.f;   // f8e4m3: stored = e4m3_sat(value * fp8_inv_scale)
  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
};

// The recipes of every tensor of the checkpoint, in checkpoint order (embeddings, layers,
// norm_f, lm_head). Throws strata::Error when options.dtype is not f32/bf16.
std::vector<SyntheticTensor> synthetic_plan(const ModelConfig& c, const SyntheticOptions& o);

// Element i before the cast to the stored dtype (for f8e4m3: the real value, i.e. before scaling).
float synthetic_value(const SyntheticTensor& t, int64_t i);

// A host tensor holding the recipe's values (multi-threaded).
Tensor materialize_synthetic(const SyntheticTensor& t);

// Fills a contiguous device tensor of the recipe's shape and dtype on `stream` (CUDA builds;
// elsewhere throws naming the missing backend).
void fill_synthetic_device(const SyntheticTensor& t, Tensor& out, void* stream);

}  // namespace strata::model
