// Device state belongs to a context, not to the process: two contexts on one GPU (each with its
// own stream, arena, index-error counter, cuBLASLt state and MoE tables) run two engines at the
// same time from two threads, and each produces exactly the tokens the default context
// produces alone; an out-of-range index counted in one context is not seen in another; the
// default context's copies and allocations do not move while the other two work.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <thread>

#include "../common/require_gpu.h"
#include "../model/model_test_util.h"
#include "engine_gpu_util.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/ops.h"

namespace strata::engine {
namespace {

using Tokens = testing::TokensById;
using testing::run_requests;

class DeviceContextsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::device_available(&why)) {
      STRATA_GPU_SKIP("no CUDA device for the device-context tests: " + why);
    }
    OpContext ctx;
    prepare_device(Device::Cuda, ctx);
    c_ = testing::gpu_tiny_config();
    m_ = testing::load_gpu_tiny(c_, 21);  // in the default context; read by every context below
  }
  EngineConfig config() const {
    EngineConfig e;
    e.executor.device = Device::Cuda;
    e.executor.max_num_seqs = 8;
    e.executor.max_model_len = 128;  // the longest request: 70 prompt + 27 generated tokens
    e.executor.gpu_memory_utilization = 0.3;  // three engines share the GPU
    e.max_num_batched_tokens = 64;            // chunked prefills, mixed steps
    return e;
  }
  std::vector<EngineRequest> requests() const {
    std::vector<EngineRequest> r;
    for (int i = 0; i < 6; ++i) {
      EngineRequest q;
      q.id = fmt::format("r{}", i);
      q.prompt = model::testing::random_ids(5 + 13 * i, c_.vocab_size, 300 + i);
      q.params.temperature = 0.f;
      q.params.max_tokens = 12 + 3 * i;
      q.params.ignore_eos = true;
      r.push_back(q);
    }
    return r;
  }
  model::ModelConfig c_;
  std::unique_ptr<model::NemotronHModel> m_;
};

TEST_F(DeviceContextsGpu, TwoContextsRunTwoEnginesAtOnceAndEachMatchesTheDefaultAlone) {
  const auto reqs = requests();
  Tokens alone;
  {
    LLMEngine e(*m_, nullptr, config());
    alone = run_requests(e, reqs);
  }
  std::unique_ptr<cuda::DeviceContext> ca = cuda::DeviceContext::create(0);
  std::unique_ptr<cuda::DeviceContext> cb = cuda::DeviceContext::create(0);
  cuda::DeviceContext& def = cuda::default_context();
  ASSERT_NE(ca->stream(), cb->stream());
  ASSERT_NE(ca->stream(), def.stream());
  Tokens a, b;
  {
    // Each engine is built inside its context's scope, so its executor binds that context;
    // stepping it from another thread then works in that context (the executor opens it).
    std::unique_ptr<LLMEngine> ea, eb;
    {
      cuda::ContextScope s(*ca);
      ea = std::make_unique<LLMEngine>(*m_, nullptr, config());
    }
    {
      cuda::ContextScope s(*cb);
      eb = std::make_unique<LLMEngine>(*m_, nullptr, config());
    }
    EXPECT_EQ(ea->executor().context().device_context, ca.get());
    EXPECT_EQ(eb->executor().context().device_context, cb.get());
    const cuda::CopyCounters def_before = def.copy_counters();
    const cuda::ArenaStats def_arena_before = def.arena_stats();
    std::thread ta([&] { a = run_requests(*ea, reqs); });
    std::thread tb([&] { b = run_requests(*eb, reqs); });
    ta.join();
    tb.join();
    const cuda::CopyCounters def_after = def.copy_counters();
    EXPECT_EQ(def_after.h2d, def_before.h2d) << "the default context copied for the others";
    EXPECT_EQ(def_after.d2h, def_before.d2h);
    EXPECT_EQ(def.arena_stats().live_blocks, def_arena_before.live_blocks);
    // Nothing the engines did (graph captures included) moved the process-wide allocator off
    // the default context's arena: it must not point into a context that goes away.
    EXPECT_EQ(device_allocator(Device::Cuda), &def.arena());
    // Each context moved its own step inputs and sampled ids and holds its own caches.
    EXPECT_GT(ca->copy_counters().h2d, 0);
    EXPECT_GT(cb->copy_counters().d2h, 0);
    EXPECT_GT(ca->arena_stats().live_blocks, 0);
    EXPECT_GT(cb->arena_stats().live_blocks, 0);
  }  // the engines go before their contexts
  int64_t compared = 0;
  for (const auto& r : reqs) {
    ASSERT_EQ(alone.at(r.id).size(), static_cast<size_t>(r.params.max_tokens)) << r.id;
    EXPECT_EQ(a.at(r.id), alone.at(r.id)) << r.id << " in context A";
    EXPECT_EQ(b.at(r.id), alone.at(r.id)) << r.id << " in context B";
    compared += 2 * static_cast<int64_t>(alone.at(r.id).size());
  }
  EXPECT_EQ(compared, 2 * (6 * 12 + 3 * 15));
  // What stays in context A after its engine is gone is its module state: the MoE tables of
  // the two MoE layers (cached per context and model). Dropping it leaves nothing.
  ca->release_module_state();
  EXPECT_EQ(ca->arena_stats().live_blocks, 0) << "context A's tensors were not all released";
}

TEST_F(DeviceContextsGpu, AnIndexErrorIsCountedOnlyInTheContextThatMetIt) {
  std::unique_ptr<cuda::DeviceContext> ca = cuda::DeviceContext::create(0);
  std::unique_ptr<cuda::DeviceContext> cb = cuda::DeviceContext::create(0);
  (void)cuda::default_context().take_index_errors();
  {
    cuda::ContextScope s(*ca);
    OpContext ctx;
    cuda::bind(ctx, *ca);
    // Embedding rows for ids 3, 500 (out of a 128-row table), 7, -1: two bad ids.
    Tensor host_table = Tensor::empty(Shape{128, 64}, DType::BF16, Device::Host);
    for (int64_t i = 0; i < host_table.numel(); ++i)
      host_table.data<uint16_t>()[i] =
          f32_to_bf16(static_cast<float>((i * 37) % 101) / 101.f - 0.5f);
    Tensor table = host_table.to(Device::Cuda);
    Tensor ids = Tensor::empty(Shape{4}, DType::I32, Device::Host);
    const int32_t v[4] = {3, 500, 7, -1};
    for (int i = 0; i < 4; ++i) ids.data<int32_t>()[i] = v[i];
    ops::EmbeddingArgs e{table, ids.to(Device::Cuda),
                         Tensor::empty(Shape{4, 64}, DType::BF16, Device::Cuda)};
    ops::run(ctx, e);
    EXPECT_EQ(ca->take_index_errors(), 2);
    EXPECT_EQ(ca->take_index_errors(), 0) << "reading resets the count";
  }
  EXPECT_EQ(cb->take_index_errors(), 0);
  EXPECT_EQ(cuda::default_context().take_index_errors(), 0);
}

}  // namespace
}  // namespace strata::engine
