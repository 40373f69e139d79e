// ModelConfig from config.json: every spelling the released and HF-native configs use
// (spec 1.1, 1.2, 9). Unknown fields are ignored (configs carry many training-only knobs);
// fields that would change the math in a way this engine does not implement are rejected.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <initializer_list>

#include "core/check.h"
#include "core/log.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "model/nemotron_h/config.h"

namespace strata::model {
namespace {

using nlohmann::json;

// Reads typed fields with aliases; a null value counts as absent (HF writes `head_dim: null`).
class Fields {
 public:
  Fields(const json& j, std::string_view source) : j_(j), src_(source) {}

  // The first alias present with a non-null value, or nullptr; `name` gets its spelling.
  const json* find(std::initializer_list<const char*> aliases, std::string* name = nullptr) const {
    for (const char* a : aliases) {
      auto it = j_.find(a);
      if (it != j_.end() && !it->is_null()) {
        if (name) *name = a;
        return &*it;
      }
    }
    return nullptr;
  }

  std::optional<int64_t> opt_int(std::initializer_list<const char*> aliases) const {
    std::string name;
    const json* v = find(aliases, &name);
    if (!v) return std::nullopt;
    return as_int(*v, name);
  }
  int64_t req_int(std::initializer_list<const char*> aliases, std::string_view why) const {
    auto v = opt_int(aliases);
    if (!v) fail("{}: missing field {} ({})", src_, spelled(aliases), why);
    return *v;
  }
  int64_t int_or(std::initializer_list<const char*> aliases, int64_t def) const {
    return opt_int(aliases).value_or(def);
  }

  std::optional<double> opt_number(std::initializer_list<const char*> aliases) const {
    std::string name;
    const json* v = find(aliases, &name);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail("{}: field {} must be a number, got {}", src_, name, v->dump());
    return v->get<double>();
  }

  bool bool_or(const char* field, bool def) const {
    const json* v = find({field});
    if (!v) return def;
    if (!v->is_boolean())
      fail("{}: field {} must be true or false, got {}", src_, field, v->dump());
    return v->get<bool>();
  }

  std::optional<std::string> opt_string(std::initializer_list<const char*> aliases) const {
    std::string name;
    const json* v = find(aliases, &name);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail("{}: field {} must be a string, got {}", src_, name, v->dump());
    return v->get<std::string>();
  }

  // Every integer is bounded so that the sizes derived from it (d_inner, conv_dim, parameter
  // counts) cannot overflow 64 bits: widths, head and expert counts at 2^24 (released models use
  // at most 2^17), vocabulary, context length and token ids at 2^31 - 1 (ids are 32-bit).
  int64_t as_int(const json& v, std::string_view name) const {
    if (!v.is_number_integer())
      fail("{}: field {} must be an integer, got {}", src_, name, v.dump());
    const bool wide = name == "vocab_size" || name == "max_position_embeddings" ||
                      name.ends_with("token_id") || name == "num_hidden_layers";
    const int64_t limit = wide ? int64_t{INT32_MAX} : int64_t{1} << 24;
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(limit))
      fail("{}: field {} = {} is above the limit {}", src_, name, v.dump(), limit);
    const int64_t x = v.get<int64_t>();
    if (x > limit || x < -limit)
      fail("{}: field {} = {} is outside [-{}, {}]", src_, name, x, limit, limit);
    return x;
  }

  std::string_view source() const { return src_; }

 private:
  static std::string spelled(std::initializer_list<const char*> aliases) {
    std::string s;
    for (const char* a : aliases)
      s += (s.empty() ? "" : " / ") + std::string(a);
    return s;
  }
  const json& j_;
  std::string_view src_;
};

LayerKind kind_from_block_type(std::string_view s, std::string_view src, int64_t layer) {
  // Two vocabularies (spec 1.1): NVIDIA remote code and native transformers.
  if (s == "mamba" || s == "linear_attention") return LayerKind::Mamba;
  if (s == "attention" || s == "full_attention") return LayerKind::Attention;
  if (s == "mlp") return LayerKind::Mlp;
  if (s == "moe") return LayerKind::Moe;
  fail(
      "{}: layers_block_type[{}] = {:?} is not a known block type (mamba / linear_attention, "
      "attention / full_attention, mlp, moe)",
      src, layer, s);
}

std::vector<LayerKind> parse_pattern(const Fields& f) {
  const std::string_view src = f.source();
  std::optional<std::vector<LayerKind>> from_string, from_list;
  if (const json* p = f.find({"hybrid_override_pattern"})) {
    if (!p->is_string())
      fail("{}: hybrid_override_pattern must be a string, got {}", src, p->dump());
    const std::string s = p->get<std::string>();
    from_string.emplace();
    for (size_t i = 0; i < s.size(); ++i)
      from_string->push_back(layer_kind_from_char(s[i], src, static_cast<int64_t>(i)));
  }
  if (const json* p = f.find({"layers_block_type"})) {
    if (!p->is_array())
      fail("{}: layers_block_type must be a list of strings, got {}", src, p->dump());
    from_list.emplace();
    for (size_t i = 0; i < p->size(); ++i) {
      const json& e = (*p)[i];
      if (!e.is_string())
        fail("{}: layers_block_type[{}] must be a string, got {}", src, i, e.dump());
      from_list->push_back(
          kind_from_block_type(e.get<std::string>(), src, static_cast<int64_t>(i)));
    }
  }
  if (!from_string && !from_list)
    fail("{}: missing the layer pattern (neither hybrid_override_pattern nor layers_block_type)",
         src);
  if (from_string && from_list && *from_string != *from_list)
    fail("{}: hybrid_override_pattern and layers_block_type describe different layers", src);
  std::vector<LayerKind> layers = from_string ? *from_string : *from_list;
  if (auto n = f.opt_int({"num_hidden_layers"}); n && *n != static_cast<int64_t>(layers.size()))
    fail("{}: num_hidden_layers is {} but the layer pattern has {} layers", src, *n, layers.size());
  return layers;
}

std::vector<int32_t> parse_token_ids(const json& v, std::string_view src, std::string_view field,
                                     const Fields& f) {
  std::vector<int32_t> ids;
  auto one = [&](const json& e) {
    const int64_t id = f.as_int(e, field);
    if (id < 0 || id > INT32_MAX) fail("{}: {} value {} is not a token id", src, field, id);
    ids.push_back(static_cast<int32_t>(id));
  };
  if (v.is_array()) {
    for (const json& e : v)
      one(e);
  } else {
    one(v);
  }
  return ids;
}

void reject_if(bool cond, std::string_view src, std::string_view what) {
  if (cond) fail("{}: {} is not supported by this engine", src, what);
}

std::string read_text_file(const std::string& path) {
  return io::read_text_file(path, "model config", io::kConfigMaxBytes);
}

// Strict like every JSON strata reads: nesting bounded, a duplicate key refused.
json parse_json_text(std::string_view text, std::string_view source) {
  json j = io::parse_json_strict(text, source, io::kFileJsonMaxDepth);
  if (!j.is_object()) fail("{}: expected a JSON object at the top level", source);
  return j;
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, std::string_view source) {
  if (!j.is_object()) fail("{}: expected a JSON object", source);
  Fields f(j, source);
  ModelConfig c;
  c.source = std::string(source);

  if (auto mt = f.opt_string({"model_type"}); mt && *mt != "nemotron_h")
    log::warn("{}: model_type is \"{}\", reading it as nemotron_h", source, *mt);

  c.layers = parse_pattern(f);
  auto has = [&](LayerKind k) { return std::count(c.layers.begin(), c.layers.end(), k) > 0; };

  c.hidden_size = f.req_int({"hidden_size"}, "model width");
  c.vocab_size = f.req_int({"vocab_size"}, "embedding rows");
  // vLLM reads layer_norm_epsilon first; the others carry the same value in released configs.
  if (auto eps = f.opt_number({"layer_norm_epsilon", "rms_norm_eps", "norm_eps"}))
    c.norm_eps = static_cast<float>(*eps);
  c.tie_word_embeddings = f.bool_or("tie_word_embeddings", false);
  c.max_position_embeddings = f.int_or({"max_position_embeddings"}, 0);
  if (auto dt = f.opt_string({"torch_dtype", "dtype"}))
    c.dtype = dtype_from_torch_name(*dt, fmt::format("{}: torch_dtype", source));

  if (has(LayerKind::Mamba)) {
    const char* why = "needed by Mamba layers";
    c.mamba_num_heads = f.req_int({"mamba_num_heads"}, why);
    c.mamba_head_dim = f.req_int({"mamba_head_dim"}, why);
    c.ssm_state_size = f.req_int({"ssm_state_size"}, why);
    c.n_groups = f.req_int({"n_groups", "mamba_n_groups"}, why);
    c.conv_kernel = f.req_int({"conv_kernel", "mamba_d_conv"}, why);
    c.chunk_size = f.int_or({"chunk_size", "mamba_chunk_size"}, 128);
    c.use_conv_bias = f.bool_or("use_conv_bias", true);
    if (auto d = f.opt_string({"mamba_ssm_cache_dtype"}); d && *d != "auto")
      c.mamba_ssm_cache_dtype =
          dtype_from_torch_name(*d, fmt::format("{}: mamba_ssm_cache_dtype", source));
    reject_if(f.bool_or("use_bias", false) || f.bool_or("mamba_proj_bias", false), source,
              "a bias on in_proj/out_proj (use_bias / mamba_proj_bias = true)");
    if (auto act = f.opt_string({"mamba_hidden_act"}); act && *act != "silu")
      fail("{}: mamba_hidden_act \"{}\" is not supported (silu)", source, *act);
  }

  if (has(LayerKind::Attention)) {
    const char* why = "needed by attention layers";
    c.num_attention_heads = f.req_int({"num_attention_heads"}, why);
    c.num_key_value_heads = f.req_int({"num_key_value_heads"}, why);
    // Never hidden / heads (spec 1.2): 9B-v2 and Nano-3 differ.
    c.head_dim = f.req_int({"head_dim", "attention_head_dim"}, why);
    reject_if(f.bool_or("attention_bias", false), source, "attention_bias = true");
    if (auto sw = f.opt_int({"sliding_window"}))
      fail("{}: sliding_window = {} is not supported (Nemotron-H attention is global)", source,
           *sw);
  }

  if (has(LayerKind::Mlp) || has(LayerKind::Moe)) {
    reject_if(f.bool_or("mlp_bias", false), source, "mlp_bias = true");
    if (auto act = f.opt_string({"mlp_hidden_act"}); act && *act != "relu2")
      fail("{}: mlp_hidden_act \"{}\" is not supported (relu2)", source, *act);
  }

  if (has(LayerKind::Mlp)) {
    std::string name;
    const json* v = f.find({"intermediate_size"}, &name);
    if (!v) fail("{}: missing field intermediate_size (needed by MLP layers)", source);
    const int64_t n_mlp = std::count(c.layers.begin(), c.layers.end(), LayerKind::Mlp);
    if (v->is_array()) {
      for (const json& e : *v)
        c.mlp_intermediate_sizes.push_back(f.as_int(e, name));
    } else {
      c.mlp_intermediate_sizes.assign(static_cast<size_t>(n_mlp), f.as_int(*v, name));
    }
  }

  if (has(LayerKind::Moe)) {
    const char* why = "needed by MoE layers";
    c.n_routed_experts = f.req_int({"n_routed_experts"}, why);
    c.num_experts_per_tok = f.req_int({"num_experts_per_tok"}, why);
    c.moe_intermediate_size = f.req_int({"moe_intermediate_size"}, why);
    c.moe_shared_expert_intermediate_size = f.req_int({"moe_shared_expert_intermediate_size"}, why);
    c.n_shared_experts = f.int_or({"n_shared_experts"}, 1);
    c.n_group = f.int_or({"n_group"}, 1);
    c.topk_group = f.int_or({"topk_group"}, 1);
    c.norm_topk_prob = f.bool_or("norm_topk_prob", true);
    if (auto s = f.opt_number({"routed_scaling_factor"}))
      c.routed_scaling_factor = static_cast<float>(*s);
    if (auto latent = f.opt_int({"moe_latent_size"}); latent && *latent > 0)
      fail("{}: moe_latent_size = {} (latent MoE, Nemotron-3-Super) is not supported", source,
           *latent);
  }

  if (auto v = f.opt_int({"bos_token_id"})) c.bos_token_id = static_cast<int32_t>(*v);
  if (auto v = f.opt_int({"pad_token_id"})) c.pad_token_id = static_cast<int32_t>(*v);
  if (const json* v = f.find({"eos_token_id"}))
    c.eos_token_ids = parse_token_ids(*v, source, "eos_token_id", f);

  c.finalize();
  return c;
}

ModelConfig ModelConfig::from_json_text(std::string_view text, std::string_view source) {
  return from_json(parse_json_text(text, source), source);
}

ModelConfig ModelConfig::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("{}: not a model directory", dir);
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(path)) fail("{}: no config.json in the model directory", dir);
  ModelConfig c = from_json_text(read_text_file(path), path);

  // generation_config.json lists the ids that end a generation (may add to config.json's).
  const std::string gen = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen)) {
    const json g = parse_json_text(read_text_file(gen), gen);
    Fields f(g, gen);
    if (const json* v = f.find({"eos_token_id"})) {
      for (int32_t id : parse_token_ids(*v, gen, "eos_token_id", f))
        if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
          c.eos_token_ids.push_back(id);
    }
    c.finalize();
  }
  return c;
}

}  // namespace strata::model
