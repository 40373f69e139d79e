// Shared by the engine's GPU tests: a tiny model of every layer kind (MoE included) in bf16, at
// shapes the device kernels take without a host bounce, loaded on the device with dummy
// weights; and a greedy run of requests through an engine, collecting each request's tokens.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../model/model_test_util.h"
#include "engine/engine.h"
#include "model/nemotron_h/load.h"

namespace strata::engine::testing {

inline model::ModelConfig gpu_tiny_config() {
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

// The model of `c` on the device (the current CUDA context), dummy weights from `seed`.
inline std::unique_ptr<model::NemotronHModel> load_gpu_tiny(const model::ModelConfig& c,
                                                            uint64_t seed) {
  model::LoadOptions lo;
  lo.device = Device::Cuda;
  lo.format = model::LoadFormat::Dummy;
  lo.dummy_config = c;
  lo.dummy = {.seed = seed, .dtype = DType::BF16};
  return model::load_model(lo);
}

using TokensById = std::map<std::string, std::vector<int32_t>>;

// Adds the requests, steps the engine until they finish, and returns each one's tokens.
inline TokensById run_requests(LLMEngine& e, const std::vector<EngineRequest>& reqs) {
  TokensById out;
  for (const auto& r : reqs) EXPECT_TRUE(e.add_request(r));
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step()) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      for (const auto& d : o.completions)
        out[o.request_id].insert(out[o.request_id].end(), d.token_ids.begin(), d.token_ids.end());
    }
  return out;
}

}  // namespace strata::engine::testing
