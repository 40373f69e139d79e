// strata quantize --format fp8: per-tensor weight scales are amax/448 of the BF16 weights and the
// stored e4m3 values dequantize to them within e4m3 rounding; input scales are the calibration
// inputs' amax/448 (checked for layer 0's in_proj against an independent float64 RMSNorm of the
// calibration tokens' embeddings); excluded modules and every other tensor are copied bit for
// bit; the result loads as FP8 and its host (W8A16) logits stay near the BF16 model's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint_test_util.h"
#include "io/checkpoint.h"
#include "io/json_strict.h"
#include "model/nemotron_h/fp8_calibration.h"
#include "model/nemotron_h/fp8_layout.h"
#include "model/nemotron_h/load.h"
#include "model/nemotron_h/quantize_fp8.h"
#include "model/nemotron_h/synthetic_checkpoint.h"
#include "model_test_util.h"

namespace strata::model {
namespace {

using test::run_strata;
using test::ScratchDir;

float scalar(const io::Checkpoint& ck, const std::string& name) {
  return ck.get(name).data<float>()[0];
}

TEST(Quantize, ScalesWeightsAndCopiesFollowTheLayout) {
  ScratchDir dir;
  const ModelConfig c = test::tiny_hybrid_config(DType::BF16);
  write_synthetic_checkpoint(dir.file("bf16"), c, {.seed = 12, .dtype = DType::BF16});
  QuantizeOptions o;
  o.calib_sequences = 3;
  o.calib_length = 20;
  const QuantizeSummary s = quantize_fp8(dir.file("bf16"), dir.file("fp8"), o);
  const io::Checkpoint in = io::Checkpoint::open(dir.file("bf16")),
                       out = io::Checkpoint::open(dir.file("fp8"));

  const auto lm = linear_modules(c);
  const std::set<std::string> linears(lm.begin(), lm.end());
  int64_t quantized = 0, copied = 0, elements = 0;
  for (const std::string& n : in.names()) {
    const std::string module = n.substr(0, n.size() - 7);
    const bool is_weight = n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0;
    const Tensor w = in.get(n), q = out.get(n);
    if (is_weight && q.dtype() == DType::F8E4M3) {
      EXPECT_TRUE(fp8_quantized_module(c, module)) << n;
      double amax = 0;
      for (int64_t i = 0; i < w.numel(); ++i)
        amax = std::max(amax, std::abs(double(bf16_to_f32(w.data<uint16_t>()[i]))));
      const double ws = scalar(out, module + ".weight_scale");
      EXPECT_NEAR(ws, amax / 448, amax / 448 * 1e-6) << n;
      for (int64_t i = 0; i < w.numel(); ++i, ++elements) {
        const double want = bf16_to_f32(w.data<uint16_t>()[i]);
        const double got = fp8e4m3_to_f32(q.data<uint8_t>()[i]) * ws;
        // Half an e4m3 ulp: 2^-4 relative for normals, 2^-10 * scale for subnormals.
        ASSERT_LE(std::abs(got - want),
                  std::max(std::abs(want) * 0x1p-4, 0x1p-10 * ws) * (1 + 1e-5))
            << n << "[" << i << "]";
      }
      EXPECT_GT(scalar(out, module + ".input_scale"), 0.f) << n;
      ++quantized;
    } else {
      EXPECT_FALSE(is_weight && linears.count(module) && fp8_quantized_module(c, module))
          << n << " should have been quantized";
      ASSERT_EQ(q.dtype(), w.dtype()) << n;
      ASSERT_EQ(std::memcmp(q.raw(), w.raw(), w.nbytes()), 0) << n;
      ++copied;
    }
  }
  EXPECT_EQ(quantized, s.quantized);
  EXPECT_GT(quantized, 10);
  EXPECT_GT(copied, 10);
  EXPECT_GT(elements, 10000);

  // Layer 0 in_proj's input is RMSNorm_0(embedding rows) of the calibration tokens: its amax,
  // computed here in float64 with the forward's bf16 rounding points (spec 3.1).
  const Tensor emb = in.get("backbone.embeddings.weight"),
               nw = in.get("backbone.layers.0.norm.weight");
  double amax = 0;
  for (const auto& ids : calibration_prompts(c.vocab_size, o.calib_sequences, o.calib_length))
    for (int32_t id : ids) {
      double ss = 0;
      for (int64_t h = 0; h < c.hidden_size; ++h) {
        const double v = bf16_to_f32(emb.data<uint16_t>()[id * c.hidden_size + h]);
        ss += v * v;
      }
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(c.hidden_size) + c.norm_eps);
      for (int64_t h = 0; h < c.hidden_size; ++h) {
        const double v = bf16_to_f32(emb.data<uint16_t>()[id * c.hidden_size + h]);
        const double y =
            round_bf16(round_bf16(static_cast<float>(v * r)) * bf16_to_f32(nw.data<uint16_t>()[h]));
        amax = std::max(amax, std::abs(y));
      }
    }
  // One bf16 ulp (2^-7 relative) of slack: f32 vs float64 rsqrt can round the max element apart.
  EXPECT_NEAR(scalar(out, "backbone.layers.0.mixer.in_proj.input_scale") * 448.0, amax,
              amax * 0x1p-7);

  // Metadata and a loadable FP8 model whose host logits stay near the BF16 model's.
  const auto hq = nlohmann::json::parse(io::read_text_file(dir.file("fp8/hf_quant_config.json")));
  EXPECT_EQ(hq["quantization"]["quant_algo"], "FP8");
  auto q8 = load_model(dir.file("fp8"), Device::Host, false);
  auto b16 = load_model(dir.file("bf16"), Device::Host, false);
  EXPECT_EQ(q8->weights().layers[0].mamba.in_proj.weight.dtype(), DType::F8E4M3);
  testing::Runner rq(*q8, 1, 16), rb(*b16, 1, 16);
  auto sq = rq.start(), sb = rb.start();
  const auto ids = testing::random_ids(12, c.vocab_size, 4);
  const auto lq = rq.step({&sq}, {ids}, LogitRows::All), lb = rb.step({&sb}, {ids}, LogitRows::All);
  double worst = 0, best = 1e9;
  for (size_t r = 0; r < lq.size(); ++r) {
    const double e = testing::rel_l2(lq[r], lb[r]);
    worst = std::max(worst, e);
    best = std::min(best, e);
  }
  // Weight quantization only (the host is W8A16): about e4m3's rms relative rounding
  // (2^-4 / sqrt(3) = 3.6%) per FP8 linear; damped residual branches keep the sum well under
  // a quarter. Above 0: the weights really changed.
  EXPECT_LT(worst, 0.25);
  EXPECT_GT(best, 0.0);
}

TEST(Quantize, CommandRefusesBadInput) {
  ScratchDir dir;
  const ModelConfig c = test::tiny_hybrid_config(DType::BF16);
  write_synthetic_checkpoint(dir.file("fp8"), c, {.seed = 1, .dtype = DType::BF16, .fp8 = true});
  write_synthetic_checkpoint(dir.file("bf16"), c, {.seed = 1, .dtype = DType::BF16});
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"--format int4 " + dir.file("bf16") + " " + dir.file("o1"), "--format must be fp8"},
      {"--format fp8 " + dir.file("fp8") + " " + dir.file("o2"), "already quantized"},
      {"--format fp8 " + dir.file("bf16") + " " + dir.file("fp8"), "is not empty"},
      {"--format fp8 " + dir.file("nope") + " " + dir.file("o3"), "nope"},
  };
  for (const Case& k : cases) {
    const auto r = run_strata("quantize " + k.args);
    EXPECT_NE(r.status, 0) << k.args;
    EXPECT_NE(r.output.find(k.fragment), std::string::npos) << k.args << ": " << r.output;
  }
  const auto ok =
      run_strata("quantize --format fp8 --calib-length 8 " + dir.file("bf16") + " " + dir.file("o4"));
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("o4/hf_quant_config.json")));
}

}  // namespace
}  // namespace strata::model
