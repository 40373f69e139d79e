// ModelConfig: validation, derived quantities (spec 1.3) and the HF-style JSON writer.
#include "model/nemotron_h/config.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/check.h"

namespace strata::model {

LayerKind layer_kind_from_char(char c, std::string_view source, int64_t layer) {
  switch (c) {
    case 'M':
      return LayerKind::Mamba;
    case '*':
      return LayerKind::Attention;
    case '-':
      return LayerKind::Mlp;
    case 'E':
      return LayerKind::Moe;
    default:
      fail(
          "{}: hybrid_override_pattern: unknown layer char {:?} at layer {} (expected M, *, - or "
          "E)",
          source, c, layer);
  }
}

std::string_view layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::Mamba:
      return "mamba";
    case LayerKind::Attention:
      return "attention";
    case LayerKind::Mlp:
      return "mlp";
    case LayerKind::Moe:
      return "moe";
  }
  return "?";
}

DType dtype_from_torch_name(std::string_view name, std::string_view what) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  if (name == "float32" || name == "float") return DType::F32;
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16" || name == "half") return DType::F16;
  fail("{}: unknown dtype \"{}\" (expected float32, bfloat16 or float16)", what, name);
}

std::string_view torch_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    default:
      return dtype_name(t);
  }
}

std::string ModelConfig::pattern() const {
  std::string s;
  s.reserve(layers.size());
  for (LayerKind k : layers)
    s.push_back(static_cast<char>(k));
  return s;
}

int64_t ModelConfig::mlp_intermediate(int64_t layer) const {
  STRATA_CHECK(
      layer >= 0 && layer < num_layers() && layers[static_cast<size_t>(layer)] == LayerKind::Mlp,
      "layer {} is not an MLP layer", layer);
  return mlp_intermediate_sizes[static_cast<size_t>(kind_index[static_cast<size_t>(layer)])];
}

DType ModelConfig::act_dtype() const {
  return dtype.value_or(DType::BF16);
}

namespace {
void require_positive(int64_t v, std::string_view field, std::string_view source,
                      std::string_view why) {
  if (v <= 0) fail("{}: {} must be a positive integer ({}), got {}", source, field, why, v);
}
}  // namespace

void ModelConfig::finalize() {
  const std::string_view src = source;
  if (layers.empty()) fail("{}: the layer pattern is empty", src);
  require_positive(hidden_size, "hidden_size", src, "model width");
  require_positive(vocab_size, "vocab_size", src, "embedding rows");
  if (!(norm_eps > 0.f) || !std::isfinite(norm_eps))
    fail("{}: layer_norm_epsilon must be a positive finite number, got {}", src, norm_eps);

  num_mamba = num_attention = num_mlp = num_moe = 0;
  kind_index.assign(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    int64_t* counter = nullptr;
    switch (layers[i]) {
      case LayerKind::Mamba:
        counter = &num_mamba;
        break;
      case LayerKind::Attention:
        counter = &num_attention;
        break;
      case LayerKind::Mlp:
        counter = &num_mlp;
        break;
      case LayerKind::Moe:
        counter = &num_moe;
        break;
    }
    kind_index[i] = (*counter)++;
  }

  d_inner = conv_dim = in_proj_rows = heads_per_group = norm_group_size = 0;
  if (num_mamba > 0) {
    require_positive(mamba_num_heads, "mamba_num_heads", src, "Mamba layers present");
    require_positive(mamba_head_dim, "mamba_head_dim", src, "Mamba layers present");
    require_positive(ssm_state_size, "ssm_state_size", src, "Mamba layers present");
    require_positive(n_groups, "n_groups", src, "Mamba layers present");
    require_positive(chunk_size, "chunk_size", src, "SSD chunk length");
    if (conv_kernel < 2) fail("{}: conv_kernel must be >= 2, got {}", src, conv_kernel);
    if (mamba_num_heads % n_groups != 0)
      fail("{}: mamba_num_heads ({}) must be divisible by n_groups ({})", src, mamba_num_heads,
           n_groups);
    if (!is_float(mamba_ssm_cache_dtype) || mamba_ssm_cache_dtype == DType::F8E4M3)
      fail("{}: mamba_ssm_cache_dtype must be float32, bfloat16 or float16", src);
    d_inner = mamba_num_heads * mamba_head_dim;
    conv_dim = d_inner + 2 * n_groups * ssm_state_size;
    in_proj_rows = d_inner + conv_dim + mamba_num_heads;
    heads_per_group = mamba_num_heads / n_groups;
    norm_group_size = d_inner / n_groups;
  }

  q_size = kv_size = 0;
  if (num_attention > 0) {
    require_positive(num_attention_heads, "num_attention_heads", src, "attention layers present");
    require_positive(num_key_value_heads, "num_key_value_heads", src, "attention layers present");
    require_positive(head_dim, "head_dim", src, "attention layers present");
    if (num_attention_heads % num_key_value_heads != 0)
      fail("{}: num_attention_heads ({}) must be divisible by num_key_value_heads ({})", src,
           num_attention_heads, num_key_value_heads);
    q_size = num_attention_heads * head_dim;
    kv_size = num_key_value_heads * head_dim;
  }

  if (num_mlp > 0) {
    if (static_cast<int64_t>(mlp_intermediate_sizes.size()) != num_mlp)
      fail("{}: intermediate_size gives {} widths for {} MLP layers", src,
           mlp_intermediate_sizes.size(), num_mlp);
    for (int64_t w : mlp_intermediate_sizes)
      require_positive(w, "intermediate_size", src, "MLP width");
  }

  shared_intermediate = 0;
  if (num_moe > 0) {
    require_positive(n_routed_experts, "n_routed_experts", src, "MoE layers present");
    require_positive(num_experts_per_tok, "num_experts_per_tok", src, "MoE layers present");
    require_positive(moe_intermediate_size, "moe_intermediate_size", src, "MoE layers present");
    require_positive(n_group, "n_group", src, "router groups");
    require_positive(topk_group, "topk_group", src, "router groups kept");
    if (moe_shared_expert_intermediate_size < 0 || n_shared_experts < 0)
      fail("{}: moe_shared_expert_intermediate_size and n_shared_experts must be >= 0", src);
    if (num_experts_per_tok > n_routed_experts)
      fail("{}: num_experts_per_tok ({}) exceeds n_routed_experts ({})", src, num_experts_per_tok,
           n_routed_experts);
    if (n_routed_experts % n_group != 0)
      fail("{}: n_routed_experts ({}) must be divisible by n_group ({})", src, n_routed_experts,
           n_group);
    if (topk_group > n_group)
      fail("{}: topk_group ({}) exceeds n_group ({})", src, topk_group, n_group);
    // Group scores are the sum of each group's top-2 scores (spec 3.5).
    if (n_group > 1 && n_routed_experts / n_group < 2)
      fail("{}: group-limited routing needs at least 2 experts per group ({} experts, {} groups)",
           src, n_routed_experts, n_group);
    if (num_experts_per_tok > topk_group * (n_routed_experts / n_group))
      fail("{}: num_experts_per_tok ({}) exceeds the experts in the {} kept groups", src,
           num_experts_per_tok, topk_group);
    if (!(routed_scaling_factor > 0.f) || !std::isfinite(routed_scaling_factor))
      fail("{}: routed_scaling_factor must be a positive finite number, got {}", src,
           routed_scaling_factor);
    shared_intermediate = moe_shared_expert_intermediate_size * n_shared_experts;
  }

  if (dtype && *dtype != DType::F32 && *dtype != DType::BF16)
    fail("{}: model dtype {} is not supported (float32 or bfloat16)", src,
         torch_dtype_name(*dtype));
  for (int32_t id : eos_token_ids)
    if (id < 0 || id >= vocab_size)
      fail("{}: eos_token_id {} is outside the vocabulary [0, {})", src, id, vocab_size);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j;
  j["architectures"] = {"NemotronHForCausalLM"};
  j["model_type"] = "nemotron_h";
  j["hidden_size"] = hidden_size;
  j["vocab_size"] = vocab_size;
  j["num_hidden_layers"] = num_layers();
  j["hybrid_override_pattern"] = pattern();
  j["layer_norm_epsilon"] = norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (max_position_embeddings > 0) j["max_position_embeddings"] = max_position_embeddings;
  if (dtype) j["torch_dtype"] = torch_dtype_name(*dtype);
  if (num_mamba > 0) {
    j["mamba_num_heads"] = mamba_num_heads;
    j["mamba_head_dim"] = mamba_head_dim;
    j["ssm_state_size"] = ssm_state_size;
    j["n_groups"] = n_groups;
    j["conv_kernel"] = conv_kernel;
    j["chunk_size"] = chunk_size;
    j["use_conv_bias"] = use_conv_bias;
    j["mamba_ssm_cache_dtype"] = torch_dtype_name(mamba_ssm_cache_dtype);
    j["mamba_hidden_act"] = "silu";
    j["use_bias"] = false;
  }
  if (num_attention > 0) {
    j["num_attention_heads"] = num_attention_heads;
    j["num_key_value_heads"] = num_key_value_heads;
    j["head_dim"] = head_dim;
    j["attention_bias"] = false;
  }
  if (num_mlp > 0) {
    bool uniform = true;
    for (int64_t w : mlp_intermediate_sizes)
      uniform = uniform && w == mlp_intermediate_sizes[0];
    if (uniform)
      j["intermediate_size"] = mlp_intermediate_sizes[0];
    else
      j["intermediate_size"] = mlp_intermediate_sizes;
  }
  if (num_mlp > 0 || num_moe > 0) {
    j["mlp_hidden_act"] = "relu2";
    j["mlp_bias"] = false;
  }
  if (num_moe > 0) {
    j["n_routed_experts"] = n_routed_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["moe_shared_expert_intermediate_size"] = moe_shared_expert_intermediate_size;
    j["n_shared_experts"] = n_shared_experts;
    j["n_group"] = n_group;
    j["topk_group"] = topk_group;
    j["norm_topk_prob"] = norm_topk_prob;
    j["routed_scaling_factor"] = routed_scaling_factor;
  }
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  if (eos_token_ids.size() == 1)
    j["eos_token_id"] = eos_token_ids[0];
  else if (!eos_token_ids.empty())
    j["eos_token_id"] = eos_token_ids;
  return j;
}

}  // namespace strata::model
