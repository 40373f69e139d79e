// Loading a model for a run: the load report accounts the files' bytes, loading twice gives
// identical logits, dummy weights equal the checkpoint make-checkpoint writes, FP8 metadata
// that contradicts the tensors is refused by name, weights are copied to a device once (one
// slot per tensor) and a device run with every op forced through the host bounce equals the
// host run bit for bit (on the fake device of tests/common when no GPU is present).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "../common/fake_device.h"
#include "checkpoint_test_util.h"
#include "io/checkpoint.h"
#include "io/checkpoint_writer.h"
#include "io/json_strict.h"
#include "io/safetensors.h"
#include "model/nemotron_h/load.h"
#include "model/nemotron_h/synthetic_checkpoint.h"
#include "model_test_util.h"
#include "ops/ops.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

std::vector<std::vector<float>> host_logits(NemotronHModel& m, const std::vector<int32_t>& ids) {
  OpContext ctx;
  return testing::prefill_all_logits(m, ids, ctx, 4);
}

void expect_identical(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  int64_t compared = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(a[r].size(), b[r].size());
    for (size_t i = 0; i < a[r].size(); ++i, ++compared) {
      ASSERT_TRUE(std::isfinite(a[r][i]));
      ASSERT_EQ(a[r][i], b[r][i]) << "row " << r << " col " << i;
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(Load, ReportAccountsTheFilesAndTwoLoadsGiveIdenticalLogits) {
  ScratchDir dir;
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  size_t plan_bytes = 0;
  const auto written =
      write_synthetic_checkpoint(dir.file("m"), c, {.seed = 2, .dtype = DType::BF16}, 30000);
  size_t file_bytes = 0;
  for (const auto& f : written.files)
    file_bytes += fs::file_size(dir.path() / "m" / f);
  plan_bytes = written.total_bytes;

  auto a = load_model(dir.file("m"), Device::Host, false);
  const LoadReport& r = a->load_report();
  EXPECT_EQ(r.host_mapped_bytes, file_bytes);
  EXPECT_GT(plan_bytes, 0u);
  EXPECT_EQ(r.tensors, static_cast<int64_t>(io::Checkpoint::open(dir.file("m")).size()));
  // bf16 checkpoint: only A = -exp(A_log) (f32, Hm per Mamba layer) and the f32 D converted to bf16
  // are copies.
  EXPECT_EQ(r.host_copied_bytes, static_cast<size_t>(c.num_mamba * c.mamba_num_heads * (4 + 2)));
  EXPECT_GT(r.host_resident_peak, 0u);
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[0].first, "open");
  EXPECT_EQ(r.phases[1].first, "weights");
  EXPECT_NE(r.text().find("host mapped"), std::string::npos);

  auto b = load_model(dir.file("m"), Device::Host, false);
  const auto ids = testing::random_ids(11, c.vocab_size, 5);
  expect_identical(host_logits(*a, ids), host_logits(*b, ids));
}

TEST(Load, DummyWeightsEqualTheWrittenCheckpoint) {
  ScratchDir dir;
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  const SyntheticOptions o{.seed = 9, .dtype = DType::BF16, .fp8 = true};
  write_synthetic_checkpoint(dir.file("m"), c, o);
  LoadOptions d;
  d.format = LoadFormat::Dummy;
  d.dummy_config = c;
  d.dummy = o;
  d.sampling = false;
  auto dummy = load_model(d);
  auto file = load_model(dir.file("m"), Device::Host, false);
  EXPECT_EQ(dummy->load_report().phases.at(0).first, "generate");
  const auto ids = testing::random_ids(9, c.vocab_size, 6);
  expect_identical(host_logits(*dummy, ids), host_logits(*file, ids));
}

// Rewrites DIR's metadata: `edit` changes both quantization descriptions (config.json's
// quantization_config and hf_quant_config.json's quantization).
void edit_quant(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string cfg = dir + "/config.json", hq = dir + "/hf_quant_config.json";
  auto c = nlohmann::json::parse(io::read_text_file(cfg));
  auto h = nlohmann::json::parse(io::read_text_file(hq));
  edit(c["quantization_config"]);
  edit(h["quantization"]);
  io::write_text_file(cfg, c.dump());
  io::write_text_file(hq, h.dump());
}

void expect_load_fails(const std::string& dir, const std::string& fragment) {
  try {
    load_model(dir, Device::Host, false);
    FAIL() << "loaded; wanted an error with " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Load, Fp8MetadataThatContradictsTheTensorsIsRefused) {
  ScratchDir dir;
  const ModelConfig c = test::tiny_hybrid_config(DType::BF16);  // M M * - M E: layer 0 is FP8
  const SyntheticOptions o{.seed = 1, .dtype = DType::BF16, .fp8 = true};
  int cases = 0;
  {  // an FP8 module listed as excluded
    write_synthetic_checkpoint(dir.file("a"), c, o);
    edit_quant(dir.file("a"), [](nlohmann::json& q) {
      q["exclude_modules"].push_back("backbone.layers.0.mixer.in_proj");
    });
    expect_load_fails(dir.file("a"), "lists the module in exclude_modules");
    ++cases;
  }
  {  // NVFP4 declared
    write_synthetic_checkpoint(dir.file("b"), c, o);
    edit_quant(dir.file("b"), [](nlohmann::json& q) {
      q["quant_algo"] = "NVFP4";
      q["group_size"] = 16;
    });
    expect_load_fails(dir.file("b"), "NVFP4 checkpoints are not supported");
    ++cases;
  }
  {  // e4m3 tensors, no metadata at all
    write_synthetic_checkpoint(dir.file("c"), c, o);
    fs::remove(dir.file("c/hf_quant_config.json"));
    auto cfg = nlohmann::json::parse(io::read_text_file(dir.file("c/config.json")));
    cfg.erase("quantization_config");
    io::write_text_file(dir.file("c/config.json"), cfg.dump());
    expect_load_fails(dir.file("c"), "declares no FP8 quantization");
    ++cases;
  }
  {  // a static input scale missing
    write_synthetic_checkpoint(dir.file("d"), c, o);
    const std::string file = dir.file("d/model.safetensors");
    std::vector<std::pair<std::string, Tensor>> keep;
    {
      const io::SafetensorsFile f = io::SafetensorsFile::open(file);
      for (const auto& t : f.tensors())
        if (t.name != "backbone.layers.0.mixer.in_proj.input_scale")
          keep.emplace_back(t.name, f.tensor(t.name).contiguous());
      for (auto& [n, t] : keep) {  // detach from the mapping before the file is replaced
        Tensor copy = Tensor::empty(t.shape(), t.dtype());
        std::memcpy(copy.raw(), t.raw(), t.nbytes());
        t = copy;
      }
    }
    io::write_safetensors(file, keep);
    expect_load_fails(dir.file("d"), "backbone.layers.0.mixer.in_proj.input_scale is missing");
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

class DeviceLoad : public strata::test::FakeDeviceTest {};

TEST_F(DeviceLoad, WeightsAreCopiedOncePerDeviceIntoTheirSlots) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  auto m = testing::synthetic_model(c, 3);
  const size_t bytes = m->weights().bytes();
  const ModelWeights& d1 = m->weights_on(Device::Cuda);
  EXPECT_EQ(m->residency().transfers(Device::Cuda).bytes, bytes);
  const ModelWeights& d2 = m->weights_on(Device::Cuda);
  EXPECT_EQ(&d1, &d2);  // the copy is made once
  EXPECT_EQ(m->residency().transfers(Device::Cuda).bytes, bytes);
  // Slot i of the copy holds tensor i of the loaded weights: same name order, shapes, bytes.
  std::vector<std::pair<std::string, Tensor>> host, dev;
  m->weights().for_each_tensor([&](const std::string& n, Tensor& t) { host.emplace_back(n, t); });
  const_cast<ModelWeights&>(d1).for_each_tensor(
      [&](const std::string& n, Tensor& t) { dev.emplace_back(n, t); });
  ASSERT_EQ(host.size(), dev.size());
  int64_t compared = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(host[i].first, dev[i].first);
    EXPECT_EQ(dev[i].second.device(), Device::Cuda);
    ASSERT_EQ(host[i].second.shape(), dev[i].second.shape());
    const Tensor hc = host[i].second.contiguous();
    EXPECT_EQ(std::memcmp(hc.raw(), dev[i].second.raw(), hc.nbytes()), 0) << host[i].first;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int64_t>(host.size()));
  m->residency().make_resident(Device::Cuda);
  EXPECT_TRUE(m->residency().all_on(Device::Cuda));
  EXPECT_EQ(m->residency().bytes_on(Device::Cuda), bytes);
}

TEST_F(DeviceLoad, EveryOpForcedThroughTheBounceEqualsTheHostRun) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  auto m = testing::synthetic_model(c, 4);
  const auto ids = testing::random_ids(10, c.vocab_size, 7);
  const auto ref = host_logits(*m, ids);

  // Without a device kernel and without permission to bounce, the kernel check names the ops
  // (builds with the CUDA backend register real kernels for Device::Cuda: nothing is missing).
  if (!has_kernel<ops::SsmScanArgs>(Device::Cuda)) {
    try {
      m->check_kernels(Device::Cuda, false);
      FAIL() << "the fake device has no kernels";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ssm_scan"), std::string::npos) << e.what();
    }
  }
  std::string all;
  for (const auto& n : ops::op_names())
    all += (all.empty() ? "" : ",") + n;
  ops::set_forced_host_ops(all);
  m->check_kernels(Device::Cuda, true);  // every op forced: nothing missing
  OpContext ctx;
  ctx.device = Device::Cuda;
  ctx.force_host_ops = ops::forced_host_ops();
  ctx.allow_host_bounce = true;
  const auto dev = testing::prefill_all_logits(*m, ids, ctx, 4);
  ops::set_forced_host_ops("");
  expect_identical(dev, ref);
  // One bounce per op run: at least one per layer plus embedding, norm_f, lm_head and cast.
  EXPECT_GT(ctx.host_bounces.load(), c.num_layers() + 4);
  EXPECT_GT(ctx.d2h_copies.load(), ctx.host_bounces.load());
}

}  // namespace
}  // namespace strata::model
