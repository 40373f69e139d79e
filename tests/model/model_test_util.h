// Helpers shared by the model tests: a tiny hybrid config with every layer kind, a model on
// synthetic weights, a runner that pushes chunks of sequences through the forward, and logits
// comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_plan.h"
#include "engine/executor.h"
#include "model/nemotron_h/model.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::model {
// The step types live in the engine; the model tests name them unqualified.
using engine::LogitRows;
using engine::SequenceChunk;
using engine::StepInput;
}  // namespace strata::model

namespace strata::model::testing {

// Every layer kind, n_groups > 1, group-limited MoE routing, and a short SSD chunk so prompts
// of a dozen tokens span several chunks.
inline ModelConfig tiny_hybrid_config(DType dtype = DType::F32,
                                      const std::string& pattern = "M*-EM*E-M") {
  ModelConfig c;
  c.source = "tiny-hybrid";
  for (size_t i = 0; i < pattern.size(); ++i)
    c.layers.push_back(layer_kind_from_char(pattern[i], c.source, static_cast<int64_t>(i)));
  c.hidden_size = 32;
  c.vocab_size = 97;
  c.dtype = dtype;
  c.mamba_num_heads = 6;
  c.mamba_head_dim = 4;
  c.ssm_state_size = 8;
  c.n_groups = 2;
  c.conv_kernel = 4;
  c.chunk_size = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.mlp_intermediate_sizes.assign(
      static_cast<size_t>(std::count(pattern.begin(), pattern.end(), '-')), 48);
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 3;
  c.moe_intermediate_size = 16;
  c.moe_shared_expert_intermediate_size = 24;
  c.n_group = 2;
  c.topk_group = 2;
  c.routed_scaling_factor = 1.5f;
  c.eos_token_ids = {2};
  c.finalize();
  return c;
}

inline std::unique_ptr<NemotronHModel> synthetic_model(const ModelConfig& c, uint64_t seed) {
  const TensorMapSource src = make_synthetic_weights(c, {.seed = seed, .dtype = c.act_dtype()});
  return std::make_unique<NemotronHModel>(c, load_weights(src, c));
}

inline std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids)
    id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return ids;
}

// Logits as host f32 rows.
inline std::vector<std::vector<float>> rows_of(const Tensor& logits) {
  const Tensor h = logits.device() == Device::Host ? logits : logits.to(Device::Host);
  std::vector<std::vector<float>> rows;
  for (int64_t r = 0; r < h.dim(0); ++r) {
    const float* p = h.data<float>() + r * h.dim(1);
    rows.emplace_back(p, p + h.dim(1));
  }
  return rows;
}

// Logits of one prefill of `ids` (every position) on ctx's device, from a fresh cache with
// blocks of `block_size` tokens, as host rows.
inline std::vector<std::vector<float>> prefill_all_logits(NemotronHModel& m,
                                                          const std::vector<int32_t>& ids,
                                                          OpContext& ctx, int64_t block_size) {
  const auto T = static_cast<int64_t>(ids.size());
  engine::ExecutorConfig ec;
  ec.device = ctx.device;
  ec.max_num_seqs = 1;
  ec.max_model_len = T;
  ec.block_size = block_size;
  ec.cache_plan = cache::plan_cache_for_tokens(m.config(), 1, T, block_size, m.act_dtype());
  ec.cuda_graphs = false;
  ec.run_on = &ctx;  // the test's context: its settings, and its counts of copies and bounces
  engine::Executor ex(m, ec);
  engine::ExecutorSequence seq(ex, T);
  auto rows = rows_of(seq.forward(ids, LogitRows::All));
  return rows;
}

// ||a - b|| / ||b||, with every element of both finite.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << "element " << i;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A live sequence of a test: its state slot, blocks, and tokens pushed so far.
struct TestSeq {
  int32_t slot = -1;
  cache::BlockTable blocks;
  int64_t computed = 0;
};

// Runs the model over a cache, one step at a time.
class Runner {
 public:
  Runner(NemotronHModel& m, int64_t max_seqs, int64_t max_tokens, int64_t block_size = 4)
      : model_(m), ex_(m, config(m, max_seqs, max_tokens, block_size)), cache_(ex_.cache()) {}

  static engine::ExecutorConfig config(NemotronHModel& m, int64_t max_seqs, int64_t max_tokens,
                                       int64_t block_size) {
    engine::ExecutorConfig ec;
    ec.device = Device::Host;
    ec.max_num_seqs = max_seqs;
    ec.max_model_len = max_tokens;
    ec.block_size = block_size;
    ec.cache_plan = cache::plan_cache_for_tokens(m.config(), max_seqs, max_tokens, block_size,
                                                 m.act_dtype());
    return ec;
  }

  TestSeq start() {
    TestSeq s;
    s.slot = cache_.mamba.allocate();
    return s;
  }

  // One step: seqs[i] gets tokens[i]; returns the logits rows requested. `expect_decode`:
  // 1 / 0 asserts whether the step takes the decode kernels, -1 does not care.
  std::vector<std::vector<float>> step(const std::vector<TestSeq*>& seqs,
                                       const std::vector<std::vector<int32_t>>& tokens,
                                       LogitRows rows, int expect_decode = -1) {
    std::vector<SequenceChunk> chunks;
    for (size_t i = 0; i < seqs.size(); ++i) {
      TestSeq& s = *seqs[i];
      EXPECT_TRUE(s.blocks.ensure(cache_.kv, s.computed + static_cast<int64_t>(tokens[i].size())));
      SequenceChunk c;
      c.slot = s.slot;
      c.num_computed = s.computed;
      c.tokens = tokens[i];
      c.blocks = &s.blocks;
      chunks.push_back(std::move(c));
    }
    const StepInput step = ex_.prepare(chunks);
    if (expect_decode >= 0) {
      EXPECT_EQ(step.decode_only(), expect_decode == 1);
    }
    const Tensor logits = ex_.forward(step, rows);
    EXPECT_EQ(logits.dtype(), DType::F32);
    for (size_t i = 0; i < seqs.size(); ++i)
      seqs[i]->computed += static_cast<int64_t>(tokens[i].size());
    return rows_of(logits);
  }

  cache::ModelCache& cache() { return cache_; }

 private:
  NemotronHModel& model_;
  engine::Executor ex_;
  cache::ModelCache& cache_;
};

}  // namespace strata::model::testing
