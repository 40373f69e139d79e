// ModelConfig parsing: both pattern spellings (string and list, two vocabularies), the field
// aliases of the released configs, derived quantities, generation_config.json EOS ids, and
// one clear error per kind of bad config.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "core/check.h"
#include "model/nemotron_h/config.h"

namespace strata::model {
namespace {

using nlohmann::json;

// A small hybrid config in the NVIDIA (Nano-3 style) spelling with every layer kind.
json base_config() {
  return json{{"architectures", {"NemotronHForCausalLM"}},
              {"model_type", "nemotron_h"},
              {"hidden_size", 64},
              {"vocab_size", 300},
              {"num_hidden_layers", 6},
              {"hybrid_override_pattern", "M*-ME-"},
              {"layer_norm_epsilon", 1e-5},
              {"torch_dtype", "bfloat16"},
              {"mamba_num_heads", 6},
              {"mamba_head_dim", 8},
              {"ssm_state_size", 16},
              {"n_groups", 3},
              {"conv_kernel", 4},
              {"chunk_size", 16},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"head_dim", 24},
              {"intermediate_size", 96},
              {"n_routed_experts", 8},
              {"num_experts_per_tok", 2},
              {"moe_intermediate_size", 32},
              {"moe_shared_expert_intermediate_size", 48},
              {"n_shared_experts", 1},
              {"n_group", 2},
              {"topk_group", 1},
              {"norm_topk_prob", true},
              {"routed_scaling_factor", 2.5},
              {"eos_token_id", 2},
              {"bos_token_id", 1}};
}

// Expects parsing to fail with a message naming the source and containing `fragment`.
void expect_error(const json& j, const std::string& fragment) {
  try {
    ModelConfig::from_json(j, "cfg.json");
    FAIL() << "accepted a bad config; expected an error containing: " << fragment;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos)
        << "message: " << msg << "\nwanted: " << fragment;
  }
}

TEST(Config, ParsesEveryFieldAndDerives) {
  const ModelConfig c = ModelConfig::from_json(base_config(), "cfg.json");
  EXPECT_EQ(c.pattern(), "M*-ME-");
  EXPECT_EQ(c.num_layers(), 6);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.act_dtype(), DType::BF16);
  EXPECT_EQ(c.mamba_ssm_cache_dtype, DType::F32);  // default when absent (spec 1.6)
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.chunk_size, 16);
  // Counts and per-kind indices walk the pattern.
  EXPECT_EQ(c.num_mamba, 2);
  EXPECT_EQ(c.num_attention, 1);
  EXPECT_EQ(c.num_mlp, 2);
  EXPECT_EQ(c.num_moe, 1);
  EXPECT_EQ(c.kind_index, (std::vector<int64_t>{0, 0, 0, 1, 0, 1}));
  // Spec 1.3 from the raw fields: d_inner = Hm*P, never expand*hidden.
  const int64_t d_inner = 6 * 8, gn = 3 * 16;
  EXPECT_EQ(c.d_inner, d_inner);
  EXPECT_EQ(c.conv_dim, d_inner + 2 * gn);
  EXPECT_EQ(c.in_proj_rows, d_inner + (d_inner + 2 * gn) + 6);
  EXPECT_EQ(c.heads_per_group, 2);
  EXPECT_EQ(c.norm_group_size, d_inner / 3);
  EXPECT_EQ(c.q_size, 4 * 24);  // head_dim from the config, not 64 / 4
  EXPECT_EQ(c.kv_size, 2 * 24);
  EXPECT_EQ(c.mlp_intermediate(2), 96);
  EXPECT_EQ(c.mlp_intermediate(5), 96);
  EXPECT_EQ(c.shared_intermediate, 48);
  EXPECT_EQ(c.n_group, 2);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_THROW(c.mlp_intermediate(0), Error);  // layer 0 is Mamba
}

TEST(Config, LayersBlockTypeBothVocabularies) {
  const std::vector<std::vector<std::string>> vocabularies = {
      {"mamba", "attention", "mlp", "mamba", "moe", "mlp"},
      {"linear_attention", "full_attention", "mlp", "linear_attention", "moe", "mlp"}};
  for (const auto& v : vocabularies) {
    json j = base_config();
    j.erase("hybrid_override_pattern");
    j["layers_block_type"] = v;
    EXPECT_EQ(ModelConfig::from_json(j, "cfg.json").pattern(), "M*-ME-") << v[0];
  }
  // Both spellings present and agreeing (what HF writes for some configs) is accepted.
  json both = base_config();
  both["layers_block_type"] = vocabularies[1];
  EXPECT_EQ(ModelConfig::from_json(both, "cfg.json").pattern(), "M*-ME-");
  // num_hidden_layers is optional.
  json no_count = base_config();
  no_count.erase("num_hidden_layers");
  EXPECT_EQ(ModelConfig::from_json(no_count, "cfg.json").num_layers(), 6);
}

TEST(Config, Aliases) {
  json j = base_config();
  // The Nemotron-H-8B / old-vLLM spellings.
  j.erase("head_dim");
  j["attention_head_dim"] = 40;
  j.erase("n_groups");
  j["mamba_n_groups"] = 2;
  j.erase("conv_kernel");
  j["mamba_d_conv"] = 3;
  j.erase("chunk_size");
  j["mamba_chunk_size"] = 32;
  j.erase("layer_norm_epsilon");
  j["rms_norm_eps"] = 1e-6;
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  j["head_dim"] = nullptr;  // HF writes null for unset fields: treated as absent
  ModelConfig c = ModelConfig::from_json(j, "cfg.json");
  EXPECT_EQ(c.head_dim, 40);
  EXPECT_EQ(c.n_groups, 2);
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_EQ(c.chunk_size, 32);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.act_dtype(), DType::F32);
  // norm_eps (Nano-3) alone.
  j.erase("rms_norm_eps");
  j["norm_eps"] = 3e-5;
  EXPECT_FLOAT_EQ(ModelConfig::from_json(j, "cfg.json").norm_eps, 3e-5f);
  // vLLM reads layer_norm_epsilon before the others.
  j["layer_norm_epsilon"] = 2e-5;
  EXPECT_FLOAT_EQ(ModelConfig::from_json(j, "cfg.json").norm_eps, 2e-5f);
  // Missing chunk_size falls back to 128, missing eps to 1e-5.
  j.erase("mamba_chunk_size");
  j.erase("layer_norm_epsilon");
  j.erase("norm_eps");
  c = ModelConfig::from_json(j, "cfg.json");
  EXPECT_EQ(c.chunk_size, 128);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  // mamba_ssm_cache_dtype is honoured.
  j["mamba_ssm_cache_dtype"] = "float16";
  EXPECT_EQ(ModelConfig::from_json(j, "cfg.json").mamba_ssm_cache_dtype, DType::F16);
  // eos as a list; intermediate_size as a per-MLP-layer list.
  j["eos_token_id"] = {2, 11};
  j["intermediate_size"] = {80, 112};
  c = ModelConfig::from_json(j, "cfg.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 11}));
  EXPECT_EQ(c.mlp_intermediate(2), 80);
  EXPECT_EQ(c.mlp_intermediate(5), 112);
}

TEST(Config, RandomPatternsRoundTripThroughJson) {
  // Random layer patterns written by to_json parse back to the same configuration.
  std::mt19937 rng(1234);
  const char kinds[] = {'M', '*', '-', 'E'};
  int compared = 0;
  for (int trial = 0; trial < 50; ++trial) {
    std::string p;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i)
      p.push_back(kinds[rng() % 4]);
    json j = base_config();
    j["hybrid_override_pattern"] = p;
    j["num_hidden_layers"] = n;
    const ModelConfig a = ModelConfig::from_json(j, "cfg.json");
    const ModelConfig b = ModelConfig::from_json(a.to_json(), "roundtrip");
    ASSERT_EQ(b.pattern(), p);
    EXPECT_EQ(b.kind_index, a.kind_index);
    EXPECT_EQ(b.in_proj_rows, a.in_proj_rows);
    EXPECT_EQ(b.conv_dim, a.conv_dim);
    EXPECT_EQ(b.q_size, a.q_size);
    EXPECT_EQ(b.kv_size, a.kv_size);
    EXPECT_EQ(b.mlp_intermediate_sizes, a.mlp_intermediate_sizes);
    EXPECT_EQ(b.shared_intermediate, a.shared_intermediate);
    EXPECT_EQ(b.norm_eps, a.norm_eps);
    EXPECT_EQ(b.routed_scaling_factor, a.routed_scaling_factor);
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
    EXPECT_EQ(b.dtype, a.dtype);
    ++compared;
  }
  EXPECT_EQ(compared, 50);
}

TEST(Config, ValidationErrors) {
  auto with = [](const char* key, json value) {
    json j = base_config();
    j[key] = std::move(value);
    return j;
  };
  auto without = [](const char* key) {
    json j = base_config();
    j.erase(key);
    return j;
  };
  expect_error(with("num_hidden_layers", 7), "num_hidden_layers is 7 but the layer pattern has 6");
  expect_error(with("hybrid_override_pattern", "M*X-ME"), "unknown layer char 'X' at layer 2");
  json empty = without("num_hidden_layers");
  empty["hybrid_override_pattern"] = "";
  expect_error(empty, "layer pattern is empty");
  expect_error(with("layers_block_type", {"mamba", "attention", "mlp", "mamba", "moe", "dense"}),
               "layers_block_type[5] = \"dense\"");
  expect_error(with("layers_block_type", {"mamba", "mamba", "mlp", "mamba", "moe", "mlp"}),
               "describe different layers");
  expect_error(with("mamba_num_heads", 7), "mamba_num_heads (7) must be divisible by n_groups (3)");
  expect_error(with("num_key_value_heads", 3),
               "num_attention_heads (4) must be divisible by num_key_value_heads (3)");
  expect_error(with("hidden_size", "64"), "field hidden_size must be an integer");
  expect_error(with("hidden_size", 64.5), "field hidden_size must be an integer");
  expect_error(with("hidden_size", -64), "hidden_size must be a positive integer");
  expect_error(with("conv_kernel", 1), "conv_kernel must be >= 2");
  expect_error(with("torch_dtype", "int8"), "unknown dtype \"int8\"");
  expect_error(with("torch_dtype", "float16"), "model dtype float16 is not supported");
  expect_error(with("num_experts_per_tok", 9),
               "num_experts_per_tok (9) exceeds n_routed_experts (8)");
  expect_error(with("num_experts_per_tok", 5), "exceeds the experts in the 1 kept groups");
  expect_error(with("n_group", 3), "n_routed_experts (8) must be divisible by n_group (3)");
  expect_error(with("topk_group", 3), "topk_group (3) exceeds n_group (2)");
  expect_error(with("intermediate_size", {96}),
               "intermediate_size gives 1 widths for 2 MLP layers");
  expect_error(with("eos_token_id", 300), "eos_token_id 300 is outside the vocabulary");
  expect_error(with("mlp_hidden_act", "gelu"), "mlp_hidden_act \"gelu\" is not supported");
  expect_error(with("use_bias", true), "use_bias / mamba_proj_bias = true");
  expect_error(with("attention_bias", true), "attention_bias = true is not supported");
  expect_error(with("moe_latent_size", 1024), "moe_latent_size = 1024");
  expect_error(with("sliding_window", 4096), "sliding_window = 4096 is not supported");
  expect_error(without("hybrid_override_pattern"),
               "neither hybrid_override_pattern nor layers_block_type");
  // Every field a present layer kind needs is reported by name when missing.
  for (const char* f :
       {"hidden_size", "vocab_size", "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
        "num_attention_heads", "num_key_value_heads", "n_routed_experts", "num_experts_per_tok",
        "moe_intermediate_size", "moe_shared_expert_intermediate_size"})
    expect_error(without(f), std::string("missing field ") + f);
  expect_error(without("head_dim"), "missing field head_dim / attention_head_dim");
  expect_error(without("n_groups"), "missing field n_groups / mamba_n_groups");
  expect_error(without("conv_kernel"), "missing field conv_kernel / mamba_d_conv");
  expect_error(without("intermediate_size"), "missing field intermediate_size");
  // Fields of absent layer kinds are not required.
  json dense = base_config();
  dense["hybrid_override_pattern"] = "M-M-M-";
  for (const char* f :
       {"n_routed_experts", "num_experts_per_tok", "num_attention_heads", "head_dim"})
    dense.erase(f);
  EXPECT_EQ(ModelConfig::from_json(dense, "cfg.json").num_moe, 0);
  // Not JSON / not an object.
  EXPECT_THROW(ModelConfig::from_json_text("{\"hidden_size\": ", "cfg.json"), Error);
  EXPECT_THROW(ModelConfig::from_json_text("[1, 2]", "cfg.json"), Error);
}

TEST(Config, LoadDirMergesGenerationConfigEos) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("strata_test_config_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json j = base_config();
  j["eos_token_id"] = 2;
  std::ofstream(dir / "config.json") << j.dump();
  std::ofstream(dir / "generation_config.json") << json{{"eos_token_id", {2, 11}}}.dump();
  const ModelConfig c = ModelConfig::load_dir(dir.string());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 11}));
  EXPECT_NE(c.source.find("config.json"), std::string::npos);
  // A broken generation_config.json names that file.
  std::ofstream(dir / "generation_config.json") << "{oops";
  try {
    ModelConfig::load_dir(dir.string());
    ADD_FAILURE() << "accepted broken generation_config.json";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not valid JSON"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
  EXPECT_THROW(ModelConfig::load_dir(dir.string()), Error);  // missing dir
}

}  // namespace
}  // namespace strata::model
