// The engine on CUDA (tiny random model of every layer kind, bf16, shapes the device kernels
// take without a bounce): decode graphs replay exactly what the same padded step computes
// eagerly, at every bucket the batch passes through; and the engine's greedy tokens on the
// device equal each request run alone except where the alone run's logits are a near tie.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "../common/require_gpu.h"
#include "../model/model_test_util.h"
#include "engine_gpu_util.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/executor.h"
#include "cache/cache_plan.h"
#include "ops/side_branch.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::engine {
namespace {

using testing::run_requests;

class EngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::device_available(&why)) {
      STRATA_GPU_SKIP("no CUDA device for the engine GPU tests: " + why);
    }
    OpContext ctx;
    prepare_device(Device::Cuda, ctx);
    c_ = testing::gpu_tiny_config();
    m_ = testing::load_gpu_tiny(c_, 9);
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
  model::ModelConfig c_;
  std::unique_ptr<model::NemotronHModel> m_;
};

TEST_F(EngineGpu, GraphReplayEqualsThePaddedEagerStepAtEveryBucket) {
  const auto reqs = requests();
  DeviceAllocator* const process_allocator = device_allocator(Device::Cuda);
  LLMEngine graphs(*m_, nullptr, config(16, true, false));
  LLMEngine eager(*m_, nullptr, config(16, false, true));
  const auto a = run_requests(graphs, reqs), b = run_requests(eager, reqs);
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
  // The captures allocated their intermediates in the shared region (so no arena block that a
  // later tensor could take is written by a replay), and left the process's allocator as it was.
  EXPECT_GT(graphs.executor().graph_workspace_peak_bytes(), 0u);
  EXPECT_EQ(device_allocator(Device::Cuda), process_allocator);
  EXPECT_EQ(graphs.executor().context().host_bounces.load(), 0);
  const EngineStats s = graphs.stats();
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ(s.mamba_usage, 0.0);
}

// Batched on the device vs each alone: bf16 GEMMs of other row counts may round differently,
// so a token may differ where the alone run's top two logits are within that rounding noise.
// The noise is measured, not assumed: the largest difference between the two runs' logprobs of
// the same token at the positions where they agree. A divergence is excused only when the two
// runs picked each other's second choice and the two top-two gaps together are within a few
// times that noise; it ends that request's comparison (the continuations then differ).
TEST_F(EngineGpu, BatchedGreedyEqualsAloneOnTheDevice) {
  struct Trace {
    std::vector<int32_t> ids;
    std::vector<TokenLogprobs> logprobs;  // the sampled token's and the top two, per token
  };
  auto traced = [](LLMEngine& e, std::vector<EngineRequest> reqs) {
    std::map<std::string, Trace> out;
    for (auto& r : reqs) {
      r.params.logprobs = 2;
      EXPECT_TRUE(e.add_request(r));
    }
    while (e.has_unfinished())
      for (const RequestOutput& o : e.step()) {
        EXPECT_TRUE(o.error.empty()) << o.error;
        for (const auto& d : o.completions) {
          Trace& t = out[o.request_id];
          t.ids.insert(t.ids.end(), d.token_ids.begin(), d.token_ids.end());
          t.logprobs.insert(t.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        }
      }
    return out;
  };
  const auto reqs = requests();
  LLMEngine batched(*m_, nullptr, config(16, true, false));
  const auto together = traced(batched, reqs);
  std::map<std::string, Trace> alone;
  for (const auto& r : reqs) {
    LLMEngine e(*m_, nullptr, config(1, true, false));
    alone[r.id] = traced(e, {r}).at(r.id);
  }
  double noise = 0.0;
  std::map<std::string, size_t> agree;  // tokens equal before the first divergence
  int64_t compared = 0;
  for (const auto& r : reqs) {
    const Trace &a = alone.at(r.id), &b = together.at(r.id);
    ASSERT_EQ(a.ids.size(), static_cast<size_t>(r.params.max_tokens)) << r.id;
    ASSERT_EQ(b.ids.size(), a.ids.size()) << r.id;
    ASSERT_EQ(a.logprobs.size(), a.ids.size()) << r.id;
    ASSERT_EQ(b.logprobs.size(), b.ids.size()) << r.id;
    size_t i = 0;
    for (; i < a.ids.size() && a.ids[i] == b.ids[i]; ++i)
      noise = std::max(noise, static_cast<double>(
                                  std::fabs(a.logprobs[i].logprob - b.logprobs[i].logprob)));
    agree[r.id] = i;
    compared += static_cast<int64_t>(i);
  }
  int64_t excused = 0;
  for (const auto& r : reqs) {
    const size_t i = agree.at(r.id);
    const Trace &a = alone.at(r.id), &b = together.at(r.id);
    if (i == a.ids.size()) continue;
    std::printf("request %s diverges at token %zu of %zu (batched vs alone; noise %.3g)\n",
                r.id.c_str(), i, a.ids.size(), noise);
    const auto &ta = a.logprobs[i].top, &tb = b.logprobs[i].top;
    ASSERT_GE(ta.size(), 2u);
    ASSERT_GE(tb.size(), 2u);
    EXPECT_TRUE(ta[0].first == tb[1].first && ta[1].first == tb[0].first)
        << r.id << ": the runs did not just swap their top two tokens";
    const double gaps = (ta[0].second - ta[1].second) + (tb[0].second - tb[1].second);
    // Each logit moves by about the noise between the runs; swapping two needs their relative
    // move to cover both gaps: at most twice the noise, doubled again as margin.
    EXPECT_LE(gaps, 4.0 * noise) << r.id << ": not a near tie (top-two gaps " << gaps << ")";
    ++excused;
  }
  EXPECT_GT(compared, 0);
  std::printf("%lld tokens equal before divergences, %lld divergences at near ties\n",
              static_cast<long long>(compared), static_cast<long long>(excused));
}

// The MoE's shared expert on the context's side stream (beside the router and the routed
// experts) computes exactly what it computes in order: same kernels, same inputs, separate
// buffers. A context with an observer runs every op in order, so the two runs differ only in
// the overlap. Prefill (37 tokens, every row's logits) and one decode step, bit for bit.
TEST_F(EngineGpu, SharedExpertBesideTheRoutedExpertsEqualsInOrder) {
  const std::vector<int32_t> prompt = model::testing::random_ids(37, c_.vocab_size, 404);
  auto run = [&](bool in_order, int64_t* overlapped) {
    ExecutorConfig ec;
    ec.device = Device::Cuda;
    ec.max_num_seqs = 1;
    ec.max_model_len = 64;
    ec.block_size = 16;
    ec.cache_plan = cache::plan_cache_for_tokens(m_->config(), 1, 64, 16, m_->act_dtype());
    ec.cuda_graphs = false;
    Executor ex(*m_, ec);
    if (in_order) ex.context().observer = [](const char*, const void*) {};
    const int64_t before = ops::side_branches_overlapped();
    ExecutorSequence s(ex, 64);
    std::vector<Tensor> out;
    out.push_back(s.forward(prompt, LogitRows::All).to(Device::Host));
    out.push_back(s.forward({7}, LogitRows::LastPerSequence).to(Device::Host));
    *overlapped = ops::side_branches_overlapped() - before;
    return out;
  };
  int64_t overlapped = 0, in_order_overlapped = 0;
  const auto side = run(false, &overlapped);
  const auto serial = run(true, &in_order_overlapped);
  // Two steps x the model's MoE layers forked; none with the observer.
  EXPECT_EQ(overlapped, 2 * c_.num_moe);
  EXPECT_EQ(in_order_overlapped, 0);
  int64_t compared = 0;
  for (size_t i = 0; i < side.size(); ++i) {
    ASSERT_EQ(side[i].numel(), serial[i].numel());
    const float* a = side[i].data<float>();
    const float* b = serial[i].data<float>();
    for (int64_t j = 0; j < side[i].numel(); ++j, ++compared)
      ASSERT_EQ(std::memcmp(&a[j], &b[j], sizeof(float)), 0) << "step " << i << " element " << j;
  }
  EXPECT_EQ(compared, (37 + 1) * c_.vocab_size);
}

}  // namespace
}  // namespace strata::engine
