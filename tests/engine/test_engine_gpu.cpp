// The engine on CUDA (tiny random model of every layer kind, bf16, shapes the device kernels
// take without a bounce): decode graphs replay exactly what the same padded step computes
// eagerly, at every bucket the batch passes through; and the engine's greedy tokens on the
// device equal each request run alone except where the alone run's logits are a near tie.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "../common/require_gpu.h"
#include "../model/model_test_util.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "model/nemotron_h/load.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::engine {
namespace {

model::ModelConfig gpu_tiny_config() {
  model::ModelConfig c = model::testing::tiny_hybrid_config(DType::BF16);
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.mamba_num_heads = 8;
  c.mamba_head_dim = 8;
  c.ssm_state_size = 16;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  for (auto& w : c.mlp_intermediate_sizes) w = 64;
  c.moe_intermediate_size = 32;
  c.moe_shared_expert_intermediate_size = 48;
  c.finalize();
  return c;
}

class EngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::device_available(&why)) {
      STRATA_GPU_SKIP("no CUDA device for the engine GPU tests: " + why);
    }
    OpContext ctx;
    prepare_device(Device::Cuda, ctx);
    c_ = gpu_tiny_config();
    model::LoadOptions lo;
    lo.device = Device::Cuda;
    lo.format = model::LoadFormat::Dummy;
    lo.dummy_config = c_;
    lo.dummy = {.seed = 9, .dtype = DType::BF16};
    m_ = model::load_model(lo);
  }
  EngineConfig config(int64_t max_seqs, bool graphs, bool pad_eager) const {
    EngineConfig e;
    e.executor.device = Device::Cuda;
    e.executor.max_num_seqs = max_seqs;
    e.executor.max_model_len = 96;
    e.executor.block_size = 16;
    e.executor.gpu_memory_utilization = 0.9;
    e.executor.cuda_graphs = graphs;
    e.executor.pad_eager_decode = pad_eager;
    e.max_num_batched_tokens = 256;
    return e;
  }
  // Nine requests that finish one after another: the decode batch walks down 9 -> 1 through
  // the buckets 16, 8, 4, 2, 1.
  std::vector<EngineRequest> requests() const {
    std::vector<EngineRequest> r;
    for (int i = 0; i < 9; ++i) {
      EngineRequest q;
      q.id = fmt::format("r{}", i);
      q.prompt = model::testing::random_ids(3 + 5 * i, c_.vocab_size, 70 + i);
      q.params.temperature = 0.f;
      q.params.max_tokens = 4 + 6 * i;
      q.params.ignore_eos = true;
      r.push_back(q);
    }
    return r;
  }
  std::map<std::string, std::vector<int32_t>> run(LLMEngine& e, const std::vector<EngineRequest>& reqs) {
    std::map<std::string, std::vector<int32_t>> out;
    for (const auto& r : reqs) EXPECT_TRUE(e.add_request(r));
    while (e.has_unfinished())
      for (const RequestOutput& o : e.step()) {
        EXPECT_TRUE(o.error.empty()) << o.error;
        for (const auto& d : o.completions)
          out[o.request_id].insert(out[o.request_id].end(), d.token_ids.begin(), d.token_ids.end());
      }
    return out;
  }
  model::ModelConfig c_;
  std::unique_ptr<model::NemotronHModel> m_;
};

TEST_F(EngineGpu, GraphReplayEqualsThePaddedEagerStepAtEveryBucket) {
  const auto reqs = requests();
  LLMEngine graphs(*m_, nullptr, config(16, true, false));
  LLMEngine eager(*m_, nullptr, config(16, false, true));
  const auto a = run(graphs, reqs), b = run(eager, reqs);
  int64_t compared = 0;
  for (const auto& r : reqs) {
    EXPECT_EQ(a.at(r.id), b.at(r.id)) << r.id;
    EXPECT_EQ(static_cast<int64_t>(a.at(r.id).size()), r.params.max_tokens);
    compared += static_cast<int64_t>(a.at(r.id).size());
  }
  EXPECT_EQ(compared, 9 * 4 + 6 * 36);
  const std::vector<int64_t> buckets = graphs.executor().captured_buckets();
  EXPECT_EQ(buckets, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_TRUE(eager.executor().captured_buckets().empty());
  EXPECT_EQ(graphs.executor().context().host_bounces.load(), 0);
  const EngineStats s = graphs.stats();
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ(s.mamba_usage, 0.0);
}

// Batched on the device vs each alone: bf16 GEMMs of other row counts may round differently,
// so a token may differ where the alone run's top two logits are within the bf16 noise; the
// first such divergence ends that request's comparison (the continuations then differ).
TEST_F(EngineGpu, BatchedGreedyEqualsAloneOnTheDevice) {
  const auto reqs = requests();
  LLMEngine batched(*m_, nullptr, config(16, true, false));
  const auto together = run(batched, reqs);
  int64_t equal = 0, total = 0;
  for (const auto& r : reqs) {
    LLMEngine alone(*m_, nullptr, config(1, true, false));
    const auto one = run(alone, {r}).at(r.id);
    ASSERT_EQ(one.size(), together.at(r.id).size());
    total += static_cast<int64_t>(one.size());
    size_t i = 0;
    while (i < one.size() && one[i] == together.at(r.id)[i]) ++i;
    equal += static_cast<int64_t>(i);
    if (i < one.size())
      std::printf("request %s diverges at token %zu of %zu (batched vs alone)\n", r.id.c_str(), i,
                  one.size());
  }
  // A random bf16 model has few near ties: nearly every token must agree.
  EXPECT_GE(static_cast<double>(equal), 0.9 * static_cast<double>(total))
      << equal << " of " << total << " tokens agree";
}

}  // namespace
}  // namespace strata::engine
