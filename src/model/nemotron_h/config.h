// ModelConfig: the architecture of one Nemotron-H checkpoint, read from its config.json
// (spec/nemotron_h.md section 1) or taken from a built-in preset of a released size (section
// 1.4, used with synthetic weights). Every alias the released configs use is accepted; every
// derived quantity of spec 1.3 is computed once here, so no other code re-derives d_inner
// from `expand` or head_dim from hidden / heads.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace strata::model {

// One decoder layer = one pre-norm residual block with exactly one mixer.
enum class LayerKind : char { Mamba = 'M', Attention = '*', Mlp = '-', Moe = 'E' };

struct ModelConfig {
  std::string source;  // file or preset name, for messages

  // Stack.
  int64_t hidden_size = 0;  // H
  int64_t vocab_size = 0;   // V
  std::vector<LayerKind> layers;
  float norm_eps = 1e-5f;  // every RMSNorm, the gated norm included
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;  // 0 = not given
  // Activation ("model") dtype from torch_dtype / dtype; nullopt when the config has neither
  // (the weight loader then takes the embedding's dtype).
  std::optional<DType> dtype;

  // Mamba2 mixer (M layers).
  int64_t mamba_num_heads = 0;  // Hm
  int64_t mamba_head_dim = 0;   // P
  int64_t ssm_state_size = 0;   // N
  int64_t n_groups = 0;         // G
  int64_t conv_kernel = 0;      // K
  int64_t chunk_size = 128;
  bool use_conv_bias = true;
  DType mamba_ssm_cache_dtype = DType::F32;

  // Attention (* layers).
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;

  // Dense MLP (- layers): one width per MLP layer, in layer order (configs give one number or
  // a list for heterogeneous models).
  std::vector<int64_t> mlp_intermediate_sizes;

  // MoE (E layers).
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t moe_shared_expert_intermediate_size = 0;
  int64_t n_shared_experts = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;

  // Special tokens (config.json; generation_config.json adds EOS ids when loaded from a dir).
  std::optional<int32_t> bos_token_id, pad_token_id;
  std::vector<int32_t> eos_token_ids;

  // ---- Derived (spec 1.3), filled by finalize() ----
  int64_t d_inner = 0;              // Hm * P
  int64_t conv_dim = 0;             // d_inner + 2 G N  (x | B | C)
  int64_t in_proj_rows = 0;         // d_inner + conv_dim + Hm  (z | xBC | dt)
  int64_t heads_per_group = 0;      // Hm / G
  int64_t norm_group_size = 0;      // d_inner / G (gated RMSNorm group width)
  int64_t q_size = 0;               // n_heads * head_dim
  int64_t kv_size = 0;              // n_kv_heads * head_dim
  int64_t shared_intermediate = 0;  // moe_shared_expert_intermediate_size * n_shared_experts
  int64_t num_mamba = 0, num_attention = 0, num_mlp = 0, num_moe = 0;
  // Per layer: its index among the layers of its own kind (which state slot array, which KV
  // cache, which MLP width).
  std::vector<int64_t> kind_index;

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  std::string pattern() const;                    // "M-M*-..." one char per layer
  int64_t mlp_intermediate(int64_t layer) const;  // width of MLP layer `layer`
  DType act_dtype() const;                        // dtype, or bf16 when unknown

  // Checks every field, computes the derived quantities. Throws strata::Error naming
  // `source` and the field. Called by the parsers and presets; call again after editing.
  void finalize();

  // Parsing. `source` names the file in messages.
  static ModelConfig from_json(const nlohmann::json& j, std::string_view source);
  static ModelConfig from_json_text(std::string_view text, std::string_view source);
  // DIR/config.json, plus EOS ids from DIR/generation_config.json when present.
  static ModelConfig load_dir(const std::string& dir);

  // HF-style config.json (hybrid_override_pattern spelling) for writing checkpoints.
  nlohmann::json to_json() const;

  // Built-in configurations of the released sizes (spec 1.4). Names are case-insensitive.
  static ModelConfig preset(std::string_view name);
  static std::vector<std::string> preset_names();
};

LayerKind layer_kind_from_char(char c, std::string_view source, int64_t layer);
std::string_view layer_kind_name(LayerKind k);  // "mamba", "attention", "mlp", "moe"
// "float32" | "bfloat16" | "float16" (and torch.* spellings) -> DType; throws naming `what`.
DType dtype_from_torch_name(std::string_view name, std::string_view what);
std::string_view torch_dtype_name(DType t);

}  // namespace strata::model
