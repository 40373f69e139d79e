#include "model/nemotron_h/fp8_layout.h"

#include <algorithm>
#include <set>

namespace strata::model {
namespace {

std::string layer_prefix(int64_t i) {
  return "backbone.layers." + std::to_string(i) + ".mixer.";
}

}  // namespace

std::vector<int64_t> attention_feeding_mamba_layers(const ModelConfig& c) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (c.layers[static_cast<size_t>(i)] != LayerKind::Attention) continue;
    for (int64_t j = i - 1; j >= 0; --j) {
      if (c.layers[static_cast<size_t>(j)] == LayerKind::Mamba) {
        if (std::find(out.begin(), out.end(), j) == out.end()) out.push_back(j);
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> fp8_excluded_modules(const ModelConfig& c) {
  const std::vector<int64_t> guard = attention_feeding_mamba_layers(c);
  std::vector<std::string> out;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string m = layer_prefix(i);
    switch (c.layers[static_cast<size_t>(i)]) {
      case LayerKind::Mamba:
        if (std::binary_search(guard.begin(), guard.end(), i)) {
          out.push_back(m + "in_proj");
          out.push_back(m + "out_proj");
        }
        out.push_back(m + "conv1d");
        break;
      case LayerKind::Attention:
        for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
          out.push_back(m + p);
        break;
      case LayerKind::Moe:
        out.push_back(m + "gate");
        break;
      case LayerKind::Mlp:
        break;
    }
  }
  out.push_back("lm_head");
  return out;
}

std::vector<std::string> linear_modules(const ModelConfig& c) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string m = layer_prefix(i);
    switch (c.layers[static_cast<size_t>(i)]) {
      case LayerKind::Mamba:
        out.push_back(m + "in_proj");
        out.push_back(m + "out_proj");
        break;
      case LayerKind::Attention:
        for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
          out.push_back(m + p);
        break;
      case LayerKind::Mlp:
        out.push_back(m + "up_proj");
        out.push_back(m + "down_proj");
        break;
      case LayerKind::Moe:
        out.push_back(m + "gate");
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
          out.push_back(m + "experts." + std::to_string(e) + ".up_proj");
          out.push_back(m + "experts." + std::to_string(e) + ".down_proj");
        }
        if (c.shared_intermediate > 0) {
          out.push_back(m + "shared_experts.up_proj");
          out.push_back(m + "shared_experts.down_proj");
        }
        break;
    }
  }
  if (!c.tie_word_embeddings) out.push_back("lm_head");
  return out;
}

bool fp8_quantized_module(const ModelConfig& c, const std::string& module) {
  // Built once per config would be faster; the lists are short (thousands) and this runs at
  // checkpoint-writing time only.
  const std::vector<std::string> ex = fp8_excluded_modules(c);
  return std::find(ex.begin(), ex.end(), module) == ex.end();
}

}  // namespace strata::model
