// make-checkpoint: the files it writes are the official layout and format, read back by
// io::Checkpoint and the weight loader bit for bit equal to the in-memory synthetic weights,
// sharded with a valid index when large, and FP8 checkpoints carry the ModelOpt metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.h"
#include "io/checkpoint.h"
#include "io/json_strict.h"
#include "model/nemotron_h/fp8_layout.h"
#include "model/nemotron_h/synthetic.h"
#include "model/nemotron_h/synthetic_checkpoint.h"
#include "model/nemotron_h/synthetic_plan.h"
#include "model/nemotron_h/weights.h"

namespace strata::model {
namespace {

using test::run_strata;
using test::ScratchDir;
using test::tiny_hybrid_config;

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(io::read_text_file(path));
}

TEST(MakeCheckpoint, ShardedFilesHoldTheSyntheticWeights) {
  ScratchDir dir;
  const ModelConfig c = tiny_hybrid_config(DType::BF16);
  const SyntheticOptions o{.seed = 21, .dtype = DType::BF16};
  size_t total = 0;
  for (const SyntheticTensor& t : synthetic_plan(c, o))
    total += t.nbytes();
  // Shards of a quarter of the model: at least four files.
  const auto written = write_synthetic_checkpoint(dir.file("ck"), c, o, total / 4);
  ASSERT_GE(written.files.size(), 4u);
  EXPECT_EQ(written.total_bytes, total);
  const io::Checkpoint ck = io::Checkpoint::open(dir.file("ck"));
  const TensorMapSource ref = make_synthetic_weights(c, o);
  ASSERT_EQ(ck.names(), ref.names());
  int64_t compared = 0;
  for (const std::string& n : ref.names()) {
    const Tensor a = ck.get(n), b = ref.get(n);
    ASSERT_EQ(a.dtype(), b.dtype()) << n;
    ASSERT_EQ(a.shape(), b.shape()) << n;
    ASSERT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << n;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int64_t>(ref.names().size()));
  const auto index = read_json(dir.file("ck/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<size_t>(), written.total_bytes);
  EXPECT_EQ(index["weight_map"].size(), ref.names().size());

  // config.json describes the same model.
  const ModelConfig back = ModelConfig::load_dir(dir.file("ck"));
  EXPECT_EQ(back.pattern(), c.pattern());
  EXPECT_EQ(back.in_proj_rows, c.in_proj_rows);
  EXPECT_EQ(back.n_routed_experts, c.n_routed_experts);
  EXPECT_EQ(back.act_dtype(), DType::BF16);
  EXPECT_FALSE(std::filesystem::exists(dir.file("ck/hf_quant_config.json")));
}

TEST(MakeCheckpoint, Fp8CheckpointCarriesModeloptMetadataAndLoads) {
  ScratchDir dir;
  const ModelConfig c = tiny_hybrid_config(DType::BF16);
  write_synthetic_checkpoint(dir.file("fp8"), c, {.seed = 5, .dtype = DType::BF16, .fp8 = true});
  const auto hq = read_json(dir.file("fp8/hf_quant_config.json"));
  EXPECT_EQ(hq["quantization"]["quant_algo"], "FP8");
  EXPECT_TRUE(hq["producer"].contains("name"));
  const auto ex = fp8_excluded_modules(c);
  EXPECT_EQ(hq["quantization"]["exclude_modules"].get<std::vector<std::string>>(), ex);
  const auto cfg = read_json(dir.file("fp8/config.json"));
  EXPECT_EQ(cfg["quantization_config"]["quant_method"], "modelopt");
  EXPECT_EQ(cfg["quantization_config"]["quant_algo"], "FP8");
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");

  const io::Checkpoint ck = io::Checkpoint::open(dir.file("fp8"));
  TensorMapSource src("fp8 checkpoint");
  for (const std::string& n : ck.names())
    src.add(n, ck.get(n));
  const ModelWeights w = load_weights(src, ModelConfig::load_dir(dir.file("fp8")));
  // Layer 0 (M, not feeding attention) is FP8; layer 1 (M before *) and the attention stay bf16.
  EXPECT_EQ(w.layers[0].mamba.in_proj.weight.dtype(), DType::F8E4M3);
  EXPECT_GT(w.layers[0].mamba.in_proj.weight_scale, 0.f);
  EXPECT_GT(w.layers[0].mamba.in_proj.input_scale, 0.f);
  EXPECT_EQ(w.layers[1].mamba.in_proj.weight.dtype(), DType::BF16);
  EXPECT_EQ(w.layers[2].attention.q_proj.weight.dtype(), DType::BF16);
  EXPECT_EQ(w.layers[3].mlp.down.weight.dtype(), DType::F8E4M3);
  EXPECT_EQ(w.layers[5].moe.router.weight.dtype(), DType::BF16);
  EXPECT_EQ(w.layers[5].moe.up[4].weight.dtype(), DType::F8E4M3);
  EXPECT_EQ(w.lm_head.weight.dtype(), DType::BF16);
  EXPECT_TRUE(w.report.unexpected.empty());
}

TEST(MakeCheckpoint, CommandWritesALoadableCheckpoint) {
  ScratchDir dir;
  const ModelConfig c = tiny_hybrid_config(DType::BF16);
  io::write_text_file(dir.file("config.json"), c.to_json().dump());
  const auto r = run_strata("make-checkpoint --config " + dir.file("config.json") +
                            " --dtype fp8 --seed 4 " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.output;
  const io::Checkpoint ck = io::Checkpoint::open(dir.file("out"));
  // Same bits as the in-process writer with the same options.
  const TensorMapSource ref =
      make_synthetic_weights(c, {.seed = 4, .dtype = DType::BF16, .fp8 = true});
  ASSERT_EQ(ck.names(), ref.names());
  for (const std::string& n : ref.names())
    ASSERT_EQ(std::memcmp(ck.get(n).raw(), ref.get(n).raw(), ref.get(n).nbytes()), 0) << n;
}

TEST(MakeCheckpoint, CommandRejectsBadFlagsWithOneLine) {
  ScratchDir dir;
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"--preset nemotron-h-8b --config x.json " + dir.file("a"), "exactly one of"},
      {dir.file("a"), "exactly one of"},
      {"--preset no-such-model " + dir.file("a"), "unknown preset"},
      {"--preset nemotron-h-8b --dtype int4 " + dir.file("a"), "--dtype must be"},
      {"--preset nemotron-h-8b --max-shard-size 5XB " + dir.file("a"), "unknown unit"},
      {"--config " + dir.file("missing.json") + " " + dir.file("a"), "missing.json"},
  };
  int checked = 0;
  for (const Case& k : cases) {
    const auto r = run_strata("make-checkpoint " + k.args);
    EXPECT_NE(r.status, 0) << k.args;
    EXPECT_NE(r.output.find(k.fragment), std::string::npos) << k.args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

}  // namespace
}  // namespace strata::model
