// The selective FP8 layout of NVIDIA's Nemotron-H FP8 releases (spec/nemotron_h.md section 2.2),
// shared by `strata quantize` and the FP8 synthetic checkpoints: every linear weight is FP8
// (e4m3 weight, per-tensor weight_scale and static input_scale) except
//   * lm_head,
//   * the q/k/v/o projections of every attention (*) layer,
//   * in_proj / out_proj of the Mamba layer that feeds each attention layer (the nearest M
//     layer before it: layers 4, 11, 18, 25, 32, 41 of Nemotron-3-Nano-30B-A3B),
//   * every Mamba conv1d and every MoE router (`mixer.gate`), which are not FP8 GEMMs,
// and embeddings, norms, dt_bias, A_log, D and the correction bias are never quantized.
// Module names are the checkpoint names without `.weight`, as ModelOpt writes exclude_modules.
#pragma once

#include <string>
#include <vector>

#include "model/nemotron_h/config.h"

namespace strata::model {

// The exclude_modules list of the official layout (layer order, then lm_head).
std::vector<std::string> fp8_excluded_modules(const ModelConfig& c);

// Every linear module of the model (checkpoint names without `.weight`), layer order, lm_head
// last: in_proj/out_proj, q/k/v/o_proj, up/down_proj, gate, experts.E.up/down_proj,
// shared_experts.up/down_proj.
std::vector<std::string> linear_modules(const ModelConfig& c);

// Indices of the Mamba layers that feed an attention layer (kept in BF16).
std::vector<int64_t> attention_feeding_mamba_layers(const ModelConfig& c);

// True when `module` (a name from linear_modules) is stored as FP8 in the official layout.
bool fp8_quantized_module(const ModelConfig& c, const std::string& module);

}  // namespace strata::model
