// Built-in configurations of the released Nemotron-H sizes (spec/nemotron_h.md section 1.4),
// used with synthetic weights for performance work (real checkpoints are not downloadable
// here). Only the architecture numbers of the table are encoded; everything derived (d_inner,
// conv_dim, in_proj rows, layer counts) comes from ModelConfig::finalize.
#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "model/nemotron_h/config.h"

namespace strata::model {
namespace {

struct PresetSpec {
  const char* name;
  const char* pattern;
  int64_t hidden;
  int64_t q_heads, kv_heads, head_dim;
  int64_t mamba_heads, mamba_head_dim, n_groups, d_state;
  int64_t mlp_width;  // 0 = no dense MLP layers
  int64_t max_positions;
  bool moe;
};

// Nemotron-H-4B uses the 8B pattern (spec 1.4 "same as 8B").
constexpr const char* kPattern8B = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-";

constexpr PresetSpec kPresets[] = {
    {"nemotron-h-4b", kPattern8B, 3072, 32, 8, 128, 112, 64, 8, 128, 12288, 8192, false},
    {"nemotron-h-8b", kPattern8B, 4096, 32, 8, 128, 128, 64, 8, 128, 21504, 8192, false},
    {"nemotron-h-47b",
     "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-M-M---MM---M-M*-M-M-"
     "M-M-M-",
     8192, 64, 8, 128, 256, 64, 8, 256, 30720, 8192, false},
    {"nemotron-h-56b",
     "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-"
     "M-M*"
     "-M-M-M-M-M*-M-M-M-M-M-",
     8192, 64, 8, 128, 256, 64, 8, 256, 32768, 8192, false},
    {"nemotron-nano-9b-v2", "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-", 4480, 40, 8,
     128, 128, 80, 8, 128, 15680, 131072, false},
    {"nemotron-nano-12b-v2", "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-", 5120,
     40, 8, 128, 128, 80, 8, 128, 20480, 131072, false},
    {"nemotron-3-nano-30b-a3b", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", 2688, 32, 2,
     128, 64, 64, 8, 128, 0, 262144, true},
};

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

}  // namespace

std::vector<std::string> ModelConfig::preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets)
    names.emplace_back(p.name);
  return names;
}

ModelConfig ModelConfig::preset(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& p : kPresets) {
    if (key != p.name) continue;
    ModelConfig c;
    c.source = std::string("preset ") + p.name;
    const std::string pattern = p.pattern;
    for (size_t i = 0; i < pattern.size(); ++i)
      c.layers.push_back(layer_kind_from_char(pattern[i], c.source, static_cast<int64_t>(i)));
    c.hidden_size = p.hidden;
    c.vocab_size = 131072;  // every known release
    c.norm_eps = 1e-5f;
    c.tie_word_embeddings = false;
    c.max_position_embeddings = p.max_positions;
    c.dtype = DType::BF16;
    c.mamba_num_heads = p.mamba_heads;
    c.mamba_head_dim = p.mamba_head_dim;
    c.n_groups = p.n_groups;
    c.ssm_state_size = p.d_state;
    c.conv_kernel = 4;
    c.chunk_size = 128;
    c.use_conv_bias = true;
    c.mamba_ssm_cache_dtype = DType::F32;
    c.num_attention_heads = p.q_heads;
    c.num_key_value_heads = p.kv_heads;
    c.head_dim = p.head_dim;
    const int64_t n_mlp = static_cast<int64_t>(std::count(pattern.begin(), pattern.end(), '-'));
    if (p.mlp_width > 0) c.mlp_intermediate_sizes.assign(static_cast<size_t>(n_mlp), p.mlp_width);
    if (p.moe) {  // Nemotron-3-Nano-30B-A3B (spec 1.4 notes)
      c.n_routed_experts = 128;
      c.num_experts_per_tok = 6;
      c.moe_intermediate_size = 1856;
      c.moe_shared_expert_intermediate_size = 3712;
      c.n_shared_experts = 1;
      c.n_group = 1;
      c.topk_group = 1;
      c.norm_topk_prob = true;
      c.routed_scaling_factor = 2.5f;
    }
    c.bos_token_id = 1;
    c.pad_token_id = 0;
    c.eos_token_ids = {2};
    c.finalize();
    return c;
  }
  std::string known;
  for (const auto& n : preset_names())
    known += (known.empty() ? "" : ", ") + n;
  fail("unknown preset \"{}\" (known: {})", name, known);
}

}  // namespace strata::model
