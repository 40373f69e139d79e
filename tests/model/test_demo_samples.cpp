// The embedded demo model (models/demo, trained with transformers) must reproduce the greedy
// continuations transformers recorded in models/demo/samples.json. strata runs the bf16
// checkpoint with vLLM's bf16 rounding points while transformers computed in fp32 on the same
// weights, so a token may differ only where transformers' own top-2 gap is a near tie.
//
// Near-tie threshold: for the bf16 dense golden fixture (same layer kinds as the demo) strata's
// bf16 logits differ from fp32 transformers by 0.5-0.6% relative L2 (docs/FIXTURES.md). The
// demo's logits have an RMS of a few units, so a typical logit moves by ~0.02-0.05; two logits
// can only swap when their gap is below the sum of their errors, so gaps under 0.1 count as
// near ties. After a near-tie divergence the two continuations are different texts, so the
// comparison of that sample stops there.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "model/nemotron_h/load.h"

namespace strata {
namespace {

TEST(DemoModel, GreedyContinuationsMatchTransformers) {
  const std::string dir = std::string(STRATA_SOURCE_DIR) + "/models/demo";
  std::ifstream in(dir + "/samples.json");
  ASSERT_TRUE(in.good()) << "missing " << dir << "/samples.json";
  const nlohmann::json samples = nlohmann::json::parse(in)["samples"];
  ASSERT_GE(samples.size(), 3u);

  auto model = model::load_model(dir, Device::Host);
  constexpr double kNearTie = 0.1;
  size_t compared = 0, near_tie_stops = 0;
  for (const auto& s : samples) {
    const auto prompt = s["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = s["tokens"].get<std::vector<int32_t>>();
    const auto gaps = s["top2_gap"].get<std::vector<double>>();
    ASSERT_EQ(expected.size(), gaps.size());
    engine::GeneratorOptions opt;
    opt.max_context = static_cast<int64_t>(prompt.size() + expected.size());
    engine::Generator gen(*model, Device::Host, opt);
    engine::SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = static_cast<int64_t>(expected.size());
    sp.ignore_eos = true;
    const std::vector<int32_t> got = gen.generate(prompt, sp).tokens;
    ASSERT_EQ(got.size(), expected.size());
    for (size_t j = 0; j < expected.size(); ++j) {
      if (got[j] == expected[j]) {
        ++compared;
        continue;
      }
      ASSERT_LT(gaps[j], kNearTie) << s["prompt"] << ": step " << j << " got " << got[j] << ", transformers "
                                   << expected[j] << " with top-2 gap " << gaps[j];
      ++near_tie_stops;
      break;
    }
  }
  std::printf("[demo] %zu greedy tokens equal to transformers, %zu near-tie stops\n", compared, near_tie_stops);
  // Most tokens must have been compared: a run that stops early everywhere proves nothing.
  EXPECT_GE(compared, 30u);
}

}  // namespace
}  // namespace strata
