// The model commands as a user runs them: `strata generate`, `strata logits` and
// `strata inspect` on a tiny random checkpoint written by the test, compared with the same
// model run in-process; and bad input exiting non-zero with one line on stderr.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include "engine/generator.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "model/nemotron_h/checkpoint_source.h"
#include "model_test_util.h"
#include "text/tokenizer.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the strata binary with `args` (shell words), capturing stdout and stderr. Info-level
// logs (the load report) are off: stderr then holds only warnings and errors.
Result run_strata(const std::string& args, const fs::path& tmp) {
  const fs::path out = tmp / "stdout.txt", err = tmp / "stderr.txt";
  const std::string cmd = "STRATA_LOG_LEVEL=warn " + std::string(STRATA_BINARY) + " " + args +
                          " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
    config_ = std::make_unique<ModelConfig>(testing::tiny_hybrid_config(DType::F32, "M*-E"));
    config_->max_position_embeddings = 64;
    std::ofstream(dir_ / "model" / "config.json") << config_->to_json().dump(2);
    const TensorMapSource src = make_synthetic_weights(*config_, {.seed = 77, .dtype = DType::F32});
    std::vector<std::pair<std::string, Tensor>> tensors(src.tensors().begin(), src.tensors().end());
    io::write_safetensors((dir_ / "model" / "model.safetensors").string(), tensors);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string model_dir() { return (dir_ / "model").string(); }
  static std::unique_ptr<NemotronHModel> load_in_process() {
    const ModelConfig c = ModelConfig::load_dir(model_dir());
    const CheckpointSource src = CheckpointSource::open(model_dir());
    return std::make_unique<NemotronHModel>(c, load_weights(src, c));
  }

  static fs::path dir_;
  static std::unique_ptr<ModelConfig> config_;
};
fs::path Cli::dir_;
std::unique_ptr<ModelConfig> Cli::config_;

TEST_F(Cli, GenerateJsonHasTheRequestedTokensAndMatchesInProcess) {
  const Result r =
      run_strata("generate --model " + model_dir() +
                     " --prompt-ids 5,17,3,9 --max-tokens 7 --ignore-eos --output json",
                 dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(count_lines(r.out), 1) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("token_ids") && j.contains("text")) << r.out;
  const auto ids = j["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 7u);
  for (int32_t id : ids)
    EXPECT_TRUE(id >= 0 && id < config_->vocab_size) << id;
  EXPECT_EQ(j["finish_reason"], "length");

  // The default is greedy: the same ids as the in-process generator.
  auto model = load_in_process();
  engine::GeneratorOptions opt;
  opt.max_context = 11;
  engine::Generator gen(*model, Device::Host, opt);
  engine::SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 7;
  sp.ignore_eos = true;
  EXPECT_EQ(gen.generate({5, 17, 3, 9}, sp).tokens, ids);

  // Sampling is seeded: the same seed gives the same ids, in any output form.
  const std::string sampled = "generate --model " + model_dir() +
                              " --prompt-ids 5,17 --max-tokens 6 --ignore-eos --temperature 0.8 "
                              "--top-k 20 --top-p 0.9 --seed 4";
  const Result a = run_strata(sampled + " --output json", dir_);
  const Result b = run_strata(sampled + " --output json", dir_);
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(nlohmann::json::parse(a.out)["token_ids"].size(), 6u);
  const Result t = run_strata(sampled, dir_);
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(count_lines(t.out), 1);
}

TEST_F(Cli, LogitsNpyEqualsInProcessForward) {
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const fs::path npy = dir_ / "logits.npy", npy_chunked = dir_ / "logits_chunked.npy";
  Result r = run_strata(
      "logits --model " + model_dir() + " --prompt-ids 3,1,4,1,5,9,2,6,5 --out " + npy.string(),
      dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const Tensor got = io::read_npy(npy.string());
  ASSERT_EQ(got.dtype(), DType::F32);
  ASSERT_EQ(got.shape(), (Shape{9, config_->vocab_size}));

  auto model = load_in_process();
  testing::Runner runner(*model, 1, 9);
  testing::TestSeq s = runner.start();
  const auto want = runner.step({&s}, {ids}, LogitRows::All);
  // The command and this test run the same host kernels on the same weights: bit-identical.
  int64_t compared = 0;
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t v = 0; v < config_->vocab_size; ++v, ++compared)
      ASSERT_EQ(got.data<float>()[t * config_->vocab_size + v],
                want[static_cast<size_t>(t)][static_cast<size_t>(v)])
          << "row " << t << " col " << v;
  EXPECT_EQ(compared, 9 * config_->vocab_size);

  // Chunked prefill through the command: the same logits up to f32 reassociation (see
  // test_forward_consistency.cpp for the bound).
  r = run_strata("logits --model " + model_dir() +
                     " --prompt-ids 3,1,4,1,5,9,2,6,5 --prefill-chunk 4 --out " +
                     npy_chunked.string(),
                 dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto chunked = testing::rows_of(io::read_npy(npy_chunked.string()));
  for (size_t t = 0; t < 9; ++t)
    EXPECT_LE(testing::rel_l2(chunked[t], want[t]), 2e-5) << "row " << t;
}

TEST_F(Cli, InspectPrintsThePattern) {
  const Result r = run_strata("inspect " + model_dir(), dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("pattern: M*-E\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backbone.layers.3.mixer.experts.7.down_proj.weight"), std::string::npos);
  const Result p = run_strata("inspect --presets", dir_);
  ASSERT_EQ(p.rc, 0) << p.err;
  for (const auto& name : ModelConfig::preset_names())
    EXPECT_NE(p.out.find(name), std::string::npos) << name;
}

TEST_F(Cli, BadInputExitsNonZeroWithOneLine) {
  const std::string m = " --model " + model_dir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generate" + m + " --prompt-ids 1,2 --bogus", "--bogus"},
      {"generate --model " + (dir_ / "missing").string() + " --prompt-ids 1,2",
       "not a model directory"},
      {"generate" + m + " --prompt-ids 1,x,3", "\"x\" is not a token id"},
      {"generate" + m + " --prompt-ids 1,500",
       "token id 500 at position 1 is outside the vocabulary"},
      {"generate" + m + " --prompt-ids 1 --max-tokens 0", "--max-tokens: \"0\" is not an integer in [1, 16777216]"},
      {"generate" + m + " --prompt-ids 1 --top-p 0", "--top-p: \"0\" is not a finite number in (0, 1]"},
      {"generate" + m + " --prompt-ids 1,2 --max-tokens 63",
       "exceeds the model's context length (64"},
      {"generate" + m + " --prompt-ids 1 --prefill-chunk -2", "--prefill-chunk: \"-2\" is not an integer in [0, 16777216]"},
      {"generate" + m + " --prompt-ids 1 --output xml", "--output must be text or json"},
      {"generate" + m + " --prompt hello", "tokenizer"},
      {"generate" + m, "give a prompt"},
      {"logits" + m + " --prompt-ids 1,2", "--out"},
      {"logits" + m + " --prompt-ids 1,2 --out " +
           (dir_ / "no" / "such" / "dir" / "x.npy").string(),
       "x.npy"},
      {"inspect " + (dir_ / "missing").string(), "not a model directory"},
      {"generate" + m + " --prompt-ids 1 --device tpu", "unknown device \"tpu\""},
  };
  int checked = 0;
  for (const auto& [args, fragment] : cases) {
    const Result r = run_strata(args, dir_);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\nstdout: " << r.out;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

TEST_F(Cli, TextPromptThroughTheDemoTokenizer) {
  // models/demo ships a tokenizer: the prompt is encoded with it, the output decoded with it,
  // and the streamed text output equals the JSON text.
  const std::string demo = std::string(STRATA_SOURCE_DIR) + "/models/demo";
  const std::string args =
      "generate --model " + demo + " --prompt 'The cat sat on' --max-tokens 12 --ignore-eos";
  const Result j = run_strata(args + " --output json", dir_);
  ASSERT_EQ(j.rc, 0) << j.err;
  const nlohmann::json out = nlohmann::json::parse(j.out);
  const auto ids = out["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 12u);

  const text::Tokenizer tok = text::Tokenizer::from_dir(demo);
  EXPECT_EQ(out["text"].get<std::string>(), tok.decode(ids, /*skip_special_tokens=*/true));
  const ModelConfig c = ModelConfig::load_dir(demo);
  const CheckpointSource src = CheckpointSource::open(demo);
  NemotronHModel model(c, load_weights(src, c));
  const std::vector<int32_t> prompt = tok.encode("The cat sat on", true);
  engine::GeneratorOptions opt;
  opt.max_context = static_cast<int64_t>(prompt.size()) + 12;
  engine::Generator gen(model, Device::Host, opt);
  engine::SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  EXPECT_EQ(gen.generate(prompt, sp).tokens, ids);

  const Result t = run_strata(args, dir_);
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(t.out, out["text"].get<std::string>() + "\n");
}

// `strata bench --batch` on the host: every batch size gets the eager forward's time and the
// engine step's (Executor::step: eager on the host), and the roofline fraction is taken from
// the engine step; --enforce-eager leaves the step column out and takes the eager forward.
TEST_F(Cli, BatchBenchJsonHasTheEagerAndTheEngineStepColumns) {
  const fs::path json = dir_ / "batch.json", json_eager = dir_ / "batch_eager.json";
  const std::string base = "bench --model " + model_dir() +
                           " --device cpu --batch 1,3 --prompt-len 4 --steps 2 --repeats 2 "
                           "--warmup 1 --json ";
  Result r = run_strata(base + json.string(), dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("| batch | step ms | eager ms |"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["roofline_of"], "engine step");
  ASSERT_EQ(j["rows"].size(), 2u);
  int checked = 0;
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& row = j["rows"][i];
    EXPECT_EQ(row["batch"].get<int64_t>(), i == 0 ? 1 : 3);
    const double eager = row["eager_ms_per_step"], step = row["step_ms_per_step"];
    EXPECT_GT(eager, 0);
    EXPECT_GT(step, 0);
    EXPECT_EQ(row["step_mode"], "eager");  // no graphs on the host
    EXPECT_EQ(row["roofline_of"], "eager step");
    EXPECT_EQ(row["ms_per_step"].get<double>(), step);
    EXPECT_EQ(row["step_repeat_ms_per_step"].size(), 2u);
    EXPECT_EQ(row["eager_repeat_ms_per_step"].size(), 2u);
    // Both fractions are one roofline over each column's time.
    const double roofline =
        std::max(row["bytes_ms"].get<double>(), row["flops_ms"].get<double>());
    EXPECT_GT(roofline, 0);
    EXPECT_NEAR(row["fraction_of_roofline"].get<double>(), roofline / step, 1e-9 * roofline / step);
    EXPECT_NEAR(row["eager_fraction_of_roofline"].get<double>(), roofline / eager,
                1e-9 * roofline / eager);
    EXPECT_NEAR(row["tokens_per_s"].get<double>(), row["batch"].get<double>() * 1000.0 / step,
                1e-9 * row["tokens_per_s"].get<double>());
    EXPECT_FALSE(row.contains("profile_us"));
    ++checked;
  }
  EXPECT_EQ(checked, 2);

  r = run_strata(base + json_eager.string() + " --enforce-eager", dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(slurp(json_eager));
  EXPECT_EQ(j["roofline_of"], "eager forward");
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_FALSE(row.contains("step_ms_per_step")) << row.dump();
    EXPECT_EQ(row["roofline_of"], "eager forward");
    EXPECT_EQ(row["ms_per_step"].get<double>(), row["eager_ms_per_step"].get<double>());
  }

  // The per-op profile times CUDA events: refused on the host, with one line.
  r = run_strata(base + json.string() + " --profile-ops 2", dir_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--profile-ops needs --device cuda"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

TEST_F(Cli, CudaFailsClearlyWithoutABackend) {
  if (has_kernel<ops::LinearArgs>(Device::Cuda)) GTEST_SKIP() << "this build has a CUDA backend";
  const Result r =
      run_strata("generate --model " + model_dir() + " --prompt-ids 1 --device cuda", dir_);
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata::model
