// Golden fixtures: tiny Nemotron-H checkpoints made with HF transformers on the GPU machine
// (tools/fixtures/make_golden.py), with transformers' fp32 logits at every prompt position and
// its greedy continuations. Every directory under tests/fixtures/golden/ is checked; finding
// none is a failure. Each fixture runs in its own dtype; a bf16 fixture also runs with f32
// activations, which is exactly transformers' math (fp32 on the stored bf16 weights) and so
// gets the f32 bands: that separates the weight/loader path from bf16 numerics.
//
// Logit bands (relative L2 over all positions of a prompt):
// - f32 math: 1e-4 (DESIGN: f32 matches to about 1e-5; the remaining slack covers the SSD
//   chunked scan vs HF's segment-sum formulation and f32 accumulation order, both at the 1e-6
//   level per op).
// - bf16 activations: our forward rounds activations to bf16 at vLLM's storage points, so its
//   distance from the fp32 reference is of the size that an emulation of those rounding points
//   measures (expected.json "bf16_emulation_rel_l2", per prompt). We allow 3x that (different
//   accumulation order and kernels flip individual bf16 roundings, which then propagate), and
//   never less than 2^-8: the logits are themselves stored bf16 (relative error up to 2^-9 per
//   element) before the f32 cast. MoE models add routing flips: where a token's router scores
//   are a near tie, any bf16 rounding can change the chosen experts and that token's logits
//   move by several percent (spec 9.1). Which prompts hit one depends on the exact rounding
//   sequence, so every prompt may deviate as much as 1.5x the worst prompt of the emulation
//   (a flip there shows how large one flip is for this model). Without a measured emulation:
//   8 x 2^-8.
// Greedy: tokens must match transformers' greedy continuation, except at a step whose recorded
// top-2 gap is a near tie. Two logits can only swap when their gap is below the sum of their
// errors, about 2 x row_error x rms(logits), where row_error is the relative error of one
// logits row: the band for f32 math; for bf16 the larger of the band and the worst single row
// we measured on this fixture's prompts (a routing flip concentrates its error in one row).
// After an excused swap the contexts differ and the rest of that continuation is not compared.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/generator.h"
#include "io/safetensors.h"
#include "model/nemotron_h/checkpoint_source.h"
#include "model_test_util.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> fixture_dirs() {
  std::vector<std::string> dirs;
  const fs::path root = fs::path(STRATA_SOURCE_DIR) / "tests" / "fixtures" / "golden";
  if (!fs::is_directory(root)) return dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "config.json") &&
        fs::exists(e.path() / "expected.json"))
      dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

double rms(const float* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += static_cast<double>(p[i]) * p[i];
  return std::sqrt(s / static_cast<double>(n));
}

// Relative L2 of our rows against the expected [T, V] tensor; counts compared elements and
// raises *worst_row to the largest relative L2 of a single row.
double rel_l2_all(const std::vector<std::vector<float>>& got, const Tensor& want, int64_t* compared,
                  double* worst_row) {
  double num = 0, den = 0;
  EXPECT_EQ(static_cast<int64_t>(got.size()), want.dim(0));
  for (int64_t t = 0; t < want.dim(0) && t < static_cast<int64_t>(got.size()); ++t) {
    EXPECT_EQ(static_cast<int64_t>(got[static_cast<size_t>(t)].size()), want.dim(1));
    double row_num = 0, row_den = 0;
    for (int64_t v = 0; v < want.dim(1); ++v) {
      const double g = got[static_cast<size_t>(t)][static_cast<size_t>(v)],
                   w = want.data<float>()[t * want.dim(1) + v];
      EXPECT_TRUE(std::isfinite(g)) << "row " << t << " col " << v;
      row_num += (g - w) * (g - w);
      row_den += w * w;
      ++*compared;
    }
    num += row_num;
    den += row_den;
    *worst_row = std::max(*worst_row, std::sqrt(row_num / row_den));
  }
  return std::sqrt(num / den);
}

std::vector<std::vector<float>> prefill_all(NemotronHModel& m, const std::vector<int32_t>& prompt,
                                            size_t chunk) {
  testing::Runner r(m, 1, static_cast<int64_t>(prompt.size()));
  testing::TestSeq s = r.start();
  std::vector<std::vector<float>> rows;
  for (size_t done = 0; done < prompt.size(); done += chunk) {
    const size_t len = std::min(chunk, prompt.size() - done);
    auto part =
        r.step({&s},
               {std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(done),
                                     prompt.begin() + static_cast<std::ptrdiff_t>(done + len))},
               LogitRows::All);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

class Golden : public ::testing::TestWithParam<std::string> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

TEST(GoldenFixtures, Present) {
  EXPECT_FALSE(fixture_dirs().empty())
      << "no golden fixtures under " << STRATA_SOURCE_DIR
      << "/tests/fixtures/golden (tools/fixtures/make_golden.py makes them)";
}

// Checks one fixture with activations in `act`; `f32_math` selects the f32 bands.
void check_fixture(const fs::path& dir, DType act) {
  const std::string name = dir.filename().string() + (act == DType::F32 ? "[f32]" : "[bf16]");
  SCOPED_TRACE(name);
  const json expected = read_json(dir / "expected.json");
  const bool bf16 = act == DType::BF16;

  ModelConfig config = ModelConfig::load_dir(dir.string());
  config.dtype = act;  // the fixture's own dtype, or f32 math on its stored weights
  const CheckpointSource source = CheckpointSource::open(dir.string());
  NemotronHModel model(config, load_weights(source, config));
  ASSERT_EQ(model.act_dtype(), act);
  const io::SafetensorsFile logits_file =
      io::SafetensorsFile::open((dir / "expected.safetensors").string());

  const auto prompts = expected.at("prompts").get<std::vector<std::vector<int32_t>>>();
  std::vector<double> bands;
  int64_t compared = 0;
  double worst_row = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    double band = 1e-4;
    if (bf16) {
      band = 8 * std::ldexp(1.0, -8);
      if (expected.contains("bf16_emulation_rel_l2")) {
        const auto emu = expected["bf16_emulation_rel_l2"].get<std::vector<double>>();
        const double worst = *std::max_element(emu.begin(), emu.end());
        band = std::max({3 * emu.at(i), 1.5 * worst, std::ldexp(1.0, -8)});
      }
    }
    bands.push_back(band);
    const Tensor want = logits_file.tensor("logits." + std::to_string(i));
    ASSERT_EQ(want.dim(0), static_cast<int64_t>(prompts[i].size()));
    ASSERT_EQ(want.dim(1), config.vocab_size);
    const double whole =
        rel_l2_all(prefill_all(model, prompts[i], prompts[i].size()), want, &compared, &worst_row);
    // Chunked prefill with chunks that straddle the SSD chunk boundaries.
    const size_t chunk = static_cast<size_t>(config.chunk_size) + 1;
    const double chunked =
        rel_l2_all(prefill_all(model, prompts[i], chunk), want, &compared, &worst_row);
    std::cout << fmt::format(
        "[golden] {} prompt {} ({} tokens): rel L2 {:.3g} whole, {:.3g} in chunks of {}; band "
        "{:.3g}\n",
        name, i, prompts[i].size(), whole, chunked, chunk, band);
    EXPECT_LE(whole, band) << "prompt " << i;
    EXPECT_LE(chunked, band) << "prompt " << i << " chunked";
  }
  int64_t expected_count = 0;
  for (const auto& p : prompts)
    expected_count += 2 * static_cast<int64_t>(p.size()) * config.vocab_size;
  EXPECT_EQ(compared, expected_count);

  // Greedy continuations.
  int tokens_compared = 0, excused = 0;
  for (const json& g : expected.at("greedy")) {
    const size_t p = g.at("prompt").get<size_t>();
    const auto want = g.at("tokens").get<std::vector<int32_t>>();
    const auto gaps = g.at("top2_gap").get<std::vector<double>>();
    ASSERT_EQ(want.size(), gaps.size());
    const Tensor ref = logits_file.tensor("logits." + std::to_string(p));
    const double scale = rms(ref.data<float>() + (ref.dim(0) - 1) * ref.dim(1), ref.dim(1));
    const double row_error = bf16 ? std::max(bands[p], worst_row) : bands[p];
    const double near_tie = 2 * row_error * scale;

    engine::GeneratorOptions opt;
    opt.max_context = static_cast<int64_t>(prompts[p].size() + want.size());
    engine::Generator gen(model, Device::Host, opt);
    engine::SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = static_cast<int64_t>(want.size());
    sp.ignore_eos = true;
    const auto got = gen.generate(prompts[p], sp).tokens;
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      ++tokens_compared;
      if (got[j] == want[j]) continue;
      if (gaps[j] < near_tie) {
        ++excused;
        std::cout << fmt::format(
            "[golden] {} prompt {}: step {} differs at a near tie (gap {:.3g} < {:.3g})\n", name, p,
            j, gaps[j], near_tie);
        break;
      }
      ADD_FAILURE() << "prompt " << p << " step " << j << ": token " << got[j] << ", transformers "
                    << want[j] << " (top-2 gap " << gaps[j] << " >= near-tie threshold " << near_tie
                    << ")";
      break;
    }
  }
  std::cout << fmt::format(
      "[golden] {}: {} logits compared (worst row {:.3g}), {} greedy tokens compared, {} near-tie "
      "divergences\n",
      name, compared, worst_row, tokens_compared, excused);
  EXPECT_GT(tokens_compared, 0);
}

TEST_P(Golden, LogitsAndGreedyMatchTransformers) {
  const fs::path dir = GetParam();
  const std::string dtype = read_json(dir / "expected.json").at("dtype").get<std::string>();
  ASSERT_TRUE(dtype == "float32" || dtype == "bfloat16") << dtype;
  check_fixture(dir, dtype == "float32" ? DType::F32 : DType::BF16);
  // transformers' reference is fp32 math on the stored weights: with f32 activations a bf16
  // fixture must match it as tightly as an f32 fixture does.
  if (dtype == "bfloat16") check_fixture(dir, DType::F32);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(fixture_dirs()),
                         [](const auto& info) {
                           std::string n = fs::path(info.param).filename().string();
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace strata::model
