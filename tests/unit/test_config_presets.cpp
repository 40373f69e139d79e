// The built-in presets against the table of spec/nemotron_h.md section 1.4 (an independent
// source: the numbers below are copied from that table, the preset code only holds the raw
// architecture fields and derives the rest).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/check.h"
#include "model/nemotron_h/config.h"

namespace strata::model {
namespace {

struct SpecRow {
  const char* preset;
  int64_t layers;
  int64_t n_m, n_attn, n_mlp, n_moe;
  std::vector<int64_t> attention_layers;
  int64_t hidden, q_heads, kv_heads, head_dim;
  int64_t d_inner, conv_dim, in_proj_rows;
  int64_t mlp_width;  // 0: no dense MLP layers
};

// spec 1.4: layers, #M/#*/#-/#E, attention layer idx, hidden, q/kv/head_dim,
// "mamba heads x head_dim (d_inner)", "conv_dim / in_proj rows", dense MLP width.
const std::vector<SpecRow> kSpecTable = {
    {"Nemotron-3-Nano-30B-A3B",
     52,
     23,
     6,
     0,
     23,
     {5, 12, 19, 26, 33, 42},
     2688,
     32,
     2,
     128,
     4096,
     6144,
     10304,
     0},
    {"nemotron-nano-9b-v2",
     56,
     27,
     4,
     25,
     0,
     {14, 21, 30, 39},
     4480,
     40,
     8,
     128,
     10240,
     12288,
     22656,
     15680},
    {"nemotron-nano-12b-v2",
     62,
     28,
     6,
     28,
     0,
     {7, 16, 25, 34, 43, 52},
     5120,
     40,
     8,
     128,
     10240,
     12288,
     22656,
     20480},
    {"nemotron-h-4b",
     52,
     24,
     4,
     24,
     0,
     {7, 18, 29, 40},
     3072,
     32,
     8,
     128,
     7168,
     9216,
     16496,
     12288},
    {"Nemotron-H-8B",
     52,
     24,
     4,
     24,
     0,
     {7, 18, 29, 40},
     4096,
     32,
     8,
     128,
     8192,
     10240,
     18560,
     21504},
    {"nemotron-h-47b",
     98,
     45,
     5,
     48,
     0,
     {17, 38, 49, 60, 86},
     8192,
     64,
     8,
     128,
     16384,
     20480,
     37120,
     30720},
    {"nemotron-h-56b",
     118,
     54,
     10,
     54,
     0,
     {7, 18, 29, 40, 51, 62, 73, 84, 95, 106},
     8192,
     64,
     8,
     128,
     16384,
     20480,
     37120,
     32768},
};

TEST(ConfigPresets, MatchSpecTable) {
  int checked = 0;
  for (const SpecRow& r : kSpecTable) {
    SCOPED_TRACE(r.preset);
    const ModelConfig c = ModelConfig::preset(r.preset);
    EXPECT_EQ(c.num_layers(), r.layers);
    EXPECT_EQ(c.num_mamba, r.n_m);
    EXPECT_EQ(c.num_attention, r.n_attn);
    EXPECT_EQ(c.num_mlp, r.n_mlp);
    EXPECT_EQ(c.num_moe, r.n_moe);
    std::vector<int64_t> attn;
    for (int64_t i = 0; i < c.num_layers(); ++i)
      if (c.layers[static_cast<size_t>(i)] == LayerKind::Attention) attn.push_back(i);
    EXPECT_EQ(attn, r.attention_layers);
    EXPECT_EQ(c.hidden_size, r.hidden);
    EXPECT_EQ(c.num_attention_heads, r.q_heads);
    EXPECT_EQ(c.num_key_value_heads, r.kv_heads);
    EXPECT_EQ(c.head_dim, r.head_dim);
    EXPECT_EQ(c.d_inner, r.d_inner);
    EXPECT_EQ(c.conv_dim, r.conv_dim);
    EXPECT_EQ(c.in_proj_rows, r.in_proj_rows);
    EXPECT_EQ(c.vocab_size, 131072);
    EXPECT_EQ(c.conv_kernel, 4);
    EXPECT_EQ(c.mamba_ssm_cache_dtype, DType::F32);
    for (int64_t i = 0; i < c.num_layers(); ++i)
      if (c.layers[static_cast<size_t>(i)] == LayerKind::Mlp) {
        EXPECT_EQ(c.mlp_intermediate(i), r.mlp_width);
      }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(ModelConfig::preset_names().size()));
}

TEST(ConfigPresets, NanoMoeFields) {
  // spec 1.4 notes: 128 routed + 1 shared of width 3712, top-6, expert width 1856, scale 2.5.
  const ModelConfig c = ModelConfig::preset("nemotron-3-nano-30b-a3b");
  EXPECT_EQ(c.n_routed_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 1856);
  EXPECT_EQ(c.shared_intermediate, 3712);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_TRUE(c.norm_topk_prob);
  // Per-sequence SSM state (spec 4.1): 23 layers x 64x64x128 f32 = 46 MiB.
  EXPECT_EQ(c.num_mamba * c.mamba_num_heads * c.mamba_head_dim * c.ssm_state_size * 4, 46LL << 20);
}

TEST(ConfigPresets, PresetsSurviveJsonRoundTrip) {
  for (const std::string& name : ModelConfig::preset_names()) {
    const ModelConfig a = ModelConfig::preset(name);
    const ModelConfig b = ModelConfig::from_json(a.to_json(), name);
    EXPECT_EQ(a.pattern(), b.pattern()) << name;
    EXPECT_EQ(a.in_proj_rows, b.in_proj_rows) << name;
    EXPECT_EQ(a.shared_intermediate, b.shared_intermediate) << name;
  }
}

TEST(ConfigPresets, UnknownNameListsKnownOnes) {
  try {
    ModelConfig::preset("nemotron-h-9000b");
    FAIL() << "unknown preset accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nemotron-h-9000b"), std::string::npos);
    EXPECT_NE(msg.find("nemotron-nano-9b-v2"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata::model
