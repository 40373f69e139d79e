// time_step_min / time_step_floor / time_step_limit in config.json: the spec (nemotron_h.md 3.2
// step 4, 3.7) follows vLLM, which applies none of them at inference (dt_limit is hard-coded to
// (0, inf); time_step_min/max/floor only initialize dt_bias). A golden fixture (made with
// time_step_min = 1e-9 so that transformers' clamp never acts) is loaded again with the released
// models' values (time_step_min 1e-3, floor 1e-4) and a finite time_step_limit [1e-3, 1e-2]: the
// logits must be bit-identical, i.e. Δ reaches the SSM unclamped (the fixture's Δ spans
// 1e-3..1e-1 by construction and down to ~1e-5 through dt_raw, so any clamp would move them; the
// reference tests check Δ down to 1e-5 per op: HostSsmScan.TinyDtIsNotFloored).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "../common/scratch_dir.h"
#include "model/nemotron_h/checkpoint_source.h"
#include "model_test_util.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<float>> fixture_logits(const fs::path& dir,
                                               const std::vector<int32_t>& prompt) {
  const ModelConfig config = ModelConfig::load_dir(dir.string());
  const CheckpointSource source = CheckpointSource::open(dir.string());
  NemotronHModel model(config, load_weights(source, config));
  OpContext ctx;
  return testing::prefill_all_logits(model, prompt, ctx, 16);
}

TEST(TimeStep, ConfigLimitsAreNotAppliedAsInVllm) {
  const fs::path src = fs::path(STRATA_SOURCE_DIR) / "tests/fixtures/golden/dense_f32_pattern";
  std::ifstream ein(src / "expected.json");
  const auto prompts =
      nlohmann::json::parse(ein).at("prompts").get<std::vector<std::vector<int32_t>>>();
  const std::vector<int32_t>& prompt = prompts.back();  // 27 tokens, several SSD chunks

  test_util::ScratchDir tmp;
  const fs::path copy = tmp.path() / "fixture";
  fs::create_directories(copy);
  fs::copy_file(src / "model.safetensors", copy / "model.safetensors");
  std::ifstream config_in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(config_in);
  ASSERT_EQ(config.at("time_step_min").get<double>(), 1e-9);
  config["time_step_min"] = 1e-3;
  config["time_step_floor"] = 1e-4;
  config["time_step_limit"] = {1e-3, 1e-2};
  std::ofstream(copy / "config.json") << config.dump(2);

  const auto want = fixture_logits(src, prompt), got = fixture_logits(copy, prompt);
  ASSERT_EQ(got.size(), prompt.size());
  ASSERT_EQ(want.size(), got.size());
  int64_t compared = 0;
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size());
    for (size_t v = 0; v < got[t].size(); ++v, ++compared)
      ASSERT_EQ(got[t][v], want[t][v]) << "position " << t << " token " << v;
  }
  EXPECT_EQ(compared, static_cast<int64_t>(prompt.size()) * 256);
}

}  // namespace
}  // namespace strata::model
