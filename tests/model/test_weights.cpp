// Weight loading: every tensor of a synthetic checkpoint lands where the config says, as a view
// of the source (no copy) when its dtype already fits; conversions, A = -exp(A_log), name
// variants, FP8 scales, unexpected / mtp tensors, and an error naming the tensor for each kind
// of bad checkpoint.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/synthetic.h"
#include "model/nemotron_h/weights.h"

namespace strata::model {
namespace {

ModelConfig tiny_config(DType dtype) {
  ModelConfig c;
  c.source = "tiny";
  for (char ch : std::string("M*-E"))
    c.layers.push_back(layer_kind_from_char(ch, "tiny", 0));
  c.hidden_size = 16;
  c.vocab_size = 40;
  c.dtype = dtype;
  c.mamba_num_heads = 4;
  c.mamba_head_dim = 4;
  c.ssm_state_size = 5;
  c.n_groups = 2;
  c.conv_kernel = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 6;
  c.mlp_intermediate_sizes = {24};
  c.n_routed_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  c.moe_shared_expert_intermediate_size = 12;
  c.finalize();
  return c;
}

void expect_load_error(const TensorSource& src, const ModelConfig& c, const std::string& fragment) {
  try {
    load_weights(src, c);
    FAIL() << "loaded a bad checkpoint; wanted an error containing " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Weights, LoadsViewsOfTheSource) {
  const ModelConfig c = tiny_config(DType::F32);
  TensorMapSource src = make_synthetic_weights(c, {.seed = 3, .dtype = DType::F32});
  ModelWeights w = load_weights(src, c);
  ASSERT_EQ(w.layers.size(), 4u);
  EXPECT_EQ(w.act_dtype, DType::F32);
  // Views: same bytes as the source, no copy.
  EXPECT_EQ(w.embedding.raw(), src.get("backbone.embeddings.weight").raw());
  EXPECT_EQ(w.lm_head.weight.raw(), src.get("lm_head.weight").raw());
  const MambaWeights& m = w.layers[0].mamba;
  EXPECT_EQ(m.in_proj.weight.raw(), src.get("backbone.layers.0.mixer.in_proj.weight").raw());
  EXPECT_EQ(m.in_proj.weight.shape(), (Shape{c.in_proj_rows, 16}));
  EXPECT_EQ(m.conv_weight.shape(), (Shape{c.conv_dim, 4}));  // [C, 1, K] viewed [C, K]
  EXPECT_EQ(m.conv_weight.raw(), src.get("backbone.layers.0.mixer.conv1d.weight").raw());
  // A = -exp(A_log), f32, for every head.
  const Tensor a_log = src.get("backbone.layers.0.mixer.A_log");
  int checked = 0;
  for (int64_t h = 0; h < 4; ++h, ++checked)
    EXPECT_EQ(m.A.data<float>()[h], -std::exp(a_log.data<float>()[h]));
  EXPECT_EQ(checked, 4);
  EXPECT_EQ(w.layers[1].attention.k_proj.weight.shape(), (Shape{12, 16}));
  EXPECT_EQ(w.layers[2].mlp.down.weight.shape(), (Shape{16, 24}));
  const MoeWeights& e = w.layers[3].moe;
  ASSERT_EQ(e.up.size(), 4u);
  EXPECT_EQ(e.down[3].weight.raw(),
            src.get("backbone.layers.3.mixer.experts.3.down_proj.weight").raw());
  EXPECT_TRUE(e.has_shared);
  EXPECT_EQ(e.shared.up.weight.shape(), (Shape{12, 16}));
  EXPECT_EQ(e.correction_bias.dtype(), DType::F32);
  // Only A is a copy in an f32 model.
  EXPECT_EQ(w.report.converted_bytes, 4u * sizeof(float));
  EXPECT_TRUE(w.report.unexpected.empty());
  // Every tensor is visited once by the upload seam, each name once.
  std::set<std::string> names;
  size_t visited = 0;
  w.for_each_tensor([&](const std::string& n, Tensor& t) {
    EXPECT_TRUE(t.defined()) << n;
    names.insert(n);
    ++visited;
  });
  EXPECT_EQ(names.size(), visited);
  EXPECT_EQ(static_cast<int64_t>(visited), w.report.tensors);  // A counted in place of A_log
}

TEST(Weights, ConvertsToTheModelDtype) {
  // bf16 model from a checkpoint whose A_log / D / bias are f32 (the official layout): D is
  // rounded to bf16 (vLLM's parameter dtype), the correction bias stays f32.
  const ModelConfig c = tiny_config(DType::BF16);
  TensorMapSource src = make_synthetic_weights(c, {.seed = 5, .dtype = DType::BF16});
  ModelWeights w = load_weights(src, c);
  EXPECT_EQ(w.act_dtype, DType::BF16);
  const Tensor d_src = src.get("backbone.layers.0.mixer.D");
  const Tensor& d = w.layers[0].mamba.D;
  ASSERT_EQ(d.dtype(), DType::BF16);
  for (int64_t h = 0; h < 4; ++h)
    EXPECT_EQ(load_as_f32(d.raw(), DType::BF16, static_cast<size_t>(h)),
              round_bf16(d_src.data<float>()[h]));
  EXPECT_EQ(w.layers[3].moe.correction_bias.raw(),
            src.get("backbone.layers.3.mixer.gate.e_score_correction_bias").raw());
  EXPECT_EQ(w.layers[0].mamba.in_proj.weight.raw(),
            src.get("backbone.layers.0.mixer.in_proj.weight").raw());
  EXPECT_EQ(w.report.converted_bytes, 4u * 2 + 4u * 4);  // D (bf16) and A (f32)
}

TEST(Weights, NameVariantsTiesMtpAndFp8) {
  ModelConfig c = tiny_config(DType::F32);
  c.tie_word_embeddings = true;
  c.use_conv_bias = false;
  c.finalize();
  TensorMapSource src = make_synthetic_weights(c, {.seed = 9, .dtype = DType::F32});
  TensorMapSource renamed("renamed");
  for (const auto& [n, t] : src.tensors()) {
    std::string name = n;
    if (name == "backbone.embeddings.weight") name = "backbone.embedding.weight";  // older spelling
    renamed.add(name, t);
  }
  renamed.add("mtp.layers.0.norm.weight", Tensor::zeros(Shape{16}, DType::F32));
  renamed.add("backbone.layers.0.mixer.surprise", Tensor::zeros(Shape{2}, DType::F32));
  // The MLP's up projection as ModelOpt FP8 with its scales.
  Tensor fp8 = Tensor::empty(Shape{24, 16}, DType::F8E4M3);
  for (int64_t i = 0; i < fp8.numel(); ++i)
    fp8.data<uint8_t>()[i] = fp8e4m3_from_f32(0.25f * static_cast<float>(i % 7 - 3));
  renamed.add("backbone.layers.2.mixer.up_proj.weight", fp8);
  Tensor ws = Tensor::empty(Shape{}, DType::F32), is = Tensor::empty(Shape{1}, DType::F32);
  ws.data<float>()[0] = 0.03f;
  is.data<float>()[0] = 0.5f;
  renamed.add("backbone.layers.2.mixer.up_proj.weight_scale", ws);
  renamed.add("backbone.layers.2.mixer.up_proj.input_scale", is);

  ModelWeights w = load_weights(renamed, c);
  EXPECT_TRUE(w.tied_lm_head);
  EXPECT_EQ(w.lm_head.weight.raw(), w.embedding.raw());
  EXPECT_EQ(w.report.ignored_mtp, 1);
  EXPECT_EQ(w.report.unexpected, std::vector<std::string>{"backbone.layers.0.mixer.surprise"});
  const LinearWeight& up = w.layers[2].mlp.up;
  EXPECT_EQ(up.weight.dtype(), DType::F8E4M3);
  EXPECT_EQ(up.weight_scale, 0.03f);
  EXPECT_EQ(up.input_scale, 0.5f);
  // No conv bias in the checkpoint: zeros of the act dtype.
  const Tensor& cb = w.layers[0].mamba.conv_bias;
  ASSERT_EQ(cb.numel(), c.conv_dim);
  for (int64_t i = 0; i < cb.numel(); ++i)
    EXPECT_EQ(cb.data<float>()[i], 0.f);
}

TEST(Weights, FusedExpertsAreSlicedAsViews) {
  const ModelConfig c = tiny_config(DType::F32);
  TensorMapSource src = make_synthetic_weights(c, {.seed = 11, .dtype = DType::F32});
  TensorMapSource fused("fused");
  Tensor up = Tensor::empty(Shape{4, 8, 16}, DType::F32),
         down = Tensor::empty(Shape{4, 16, 8}, DType::F32);
  for (const auto& [n, t] : src.tensors()) {
    const std::string ep = "backbone.layers.3.mixer.experts.";
    if (n.rfind(ep, 0) != 0) {
      fused.add(n, t);
      continue;
    }
    const int e = std::stoi(n.substr(ep.size()));
    Tensor dst = (n.find("up_proj") != std::string::npos ? up : down).select(e);
    dst.copy_from(t);
  }
  fused.add("backbone.layers.3.mixer.experts.up_proj", up);
  fused.add("backbone.layers.3.mixer.experts.down_proj", down);
  ModelWeights w = load_weights(fused, c);
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(w.layers[3].moe.up[static_cast<size_t>(e)].weight.raw(), up.select(e).raw());
    EXPECT_EQ(w.layers[3].moe.down[static_cast<size_t>(e)].weight.shape(), (Shape{16, 8}));
  }
}

TEST(Weights, ErrorsNameTheTensor) {
  const ModelConfig c = tiny_config(DType::F32);
  const TensorMapSource good = make_synthetic_weights(c, {.seed = 13, .dtype = DType::F32});
  auto edited = [&](const std::string& drop, const std::string& add = "", Tensor t = {}) {
    TensorMapSource s("ckpt");
    for (const auto& [n, v] : good.tensors())
      if (n != drop) s.add(n, v);
    if (!add.empty()) s.add(add, t);
    return s;
  };
  expect_load_error(
      edited("backbone.layers.1.mixer.k_proj.weight"), c,
      "missing tensor backbone.layers.1.mixer.k_proj.weight (expected shape [12, 16])");
  expect_load_error(
      edited("", "backbone.layers.0.mixer.in_proj.weight", Tensor::zeros(Shape{3, 16}, DType::F32)),
      c,
      fmt::format(
          "tensor backbone.layers.0.mixer.in_proj.weight: expected shape [{}, 16], found [3, 16]",
          c.in_proj_rows));
  expect_load_error(edited("", "backbone.norm_f.weight", Tensor::zeros(Shape{16}, DType::I32)), c,
                    "tensor backbone.norm_f.weight: expected a float tensor");
  expect_load_error(edited("lm_head.weight"), c, "missing tensor lm_head.weight");
  expect_load_error(edited("backbone.embeddings.weight"), c, "no embedding tensor");
  expect_load_error(edited("", "backbone.layers.2.mixer.up_proj.weight",
                           Tensor::zeros(Shape{24, 16}, DType::F8E4M3)),
                    c, "missing tensor backbone.layers.2.mixer.up_proj.weight_scale");
  expect_load_error(
      edited("", "backbone.layers.2.mixer.up_proj.weight", Tensor::zeros(Shape{24, 8}, DType::U8)),
      c, "NVFP4");
  expect_load_error(edited("backbone.layers.3.mixer.experts.2.up_proj.weight"), c,
                    "missing tensor backbone.layers.3.mixer.experts.2.up_proj.weight");
}

}  // namespace
}  // namespace strata::model
