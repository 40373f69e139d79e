// The engine end to end on the host (tiny random hybrid model with every layer kind, f32):
// a request's greedy tokens do not depend on what it is batched with, how its prompt was
// chunked (the token budget), or whether it shared steps with prefills (mixed steps): bit for
// bit on the host, where each row's arithmetic runs in a fixed order (DESIGN principle 10).
// Also: seeded sampling is reproducible across batch compositions, and nothing leaks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <random>

#include "../model/model_test_util.h"
#include "engine/engine.h"

namespace strata::engine {
namespace {

using model::testing::random_ids;
using model::testing::synthetic_model;
using model::testing::tiny_hybrid_config;

EngineConfig host_config(int64_t max_seqs, int64_t budget, int64_t max_len = 64) {
  EngineConfig c;
  c.executor.device = Device::Host;
  c.executor.max_num_seqs = max_seqs;
  c.executor.max_model_len = max_len;
  c.executor.block_size = 4;
  c.max_num_batched_tokens = budget;
  return c;
}

EngineRequest greedy_request(const std::string& id, std::vector<int32_t> prompt, int64_t n_out) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.f;
  r.params.max_tokens = n_out;
  r.params.ignore_eos = true;
  return r;
}

// Runs every request to completion; returns each request's tokens per completion.
std::map<std::string, std::vector<std::vector<int32_t>>> run_all(LLMEngine& e,
                                                                 std::vector<EngineRequest> reqs) {
  std::map<std::string, std::vector<std::vector<int32_t>>> out;
  for (auto& r : reqs) {
    out[r.id].resize(static_cast<size_t>(r.params.n));
    EXPECT_TRUE(e.add_request(std::move(r)));
  }
  int64_t steps = 0;
  while (e.has_unfinished()) {
    for (const RequestOutput& o : e.step()) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      for (const CompletionDelta& d : o.completions) {
        auto& toks = out[o.request_id][static_cast<size_t>(d.index)];
        toks.insert(toks.end(), d.token_ids.begin(), d.token_ids.end());
      }
    }
    EXPECT_LT(++steps, 100000) << "the engine does not finish";
    if (steps >= 100000) break;
  }
  return out;
}

TEST(EngineBatching, GreedyTokensDoNotDependOnBatchOrChunking) {
  const model::ModelConfig c = tiny_hybrid_config();
  auto m = synthetic_model(c, 41);
  const std::vector<int64_t> lens = {1, 3, 7, 12, 17, 5};
  std::vector<EngineRequest> reqs;
  for (size_t i = 0; i < lens.size(); ++i)
    reqs.push_back(greedy_request(fmt::format("r{}", i), random_ids(lens[i], c.vocab_size, 100 + i),
                                  9 + static_cast<int64_t>(i)));

  // Each alone, whole prompt in one step.
  std::map<std::string, std::vector<int32_t>> alone;
  for (const auto& r : reqs) {
    LLMEngine e(*m, nullptr, host_config(1, 64));
    alone[r.id] = run_all(e, {r})[r.id][0];
    EXPECT_EQ(static_cast<int64_t>(alone[r.id].size()), r.params.max_tokens);
  }
  // All together, under budgets that chunk the prompts and mix decodes with prefill chunks.
  int64_t compared = 0;
  for (int64_t budget : {64, 13, 8, 7, 6}) {
    LLMEngine e(*m, nullptr, host_config(6, budget));
    const auto together = run_all(e, reqs);
    for (const auto& r : reqs) {
      EXPECT_EQ(together.at(r.id)[0], alone[r.id]) << r.id << " at budget " << budget;
      compared += static_cast<int64_t>(alone[r.id].size());
    }
    const EngineStats s = e.stats();
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.kv_usage, 0.0) << "blocks leaked at budget " << budget;
    EXPECT_EQ(s.mamba_usage, 0.0) << "slots leaked at budget " << budget;
  }
  EXPECT_EQ(compared, 5 * (9 + 10 + 11 + 12 + 13 + 14));  // 5 budgets x every token
}

TEST(EngineBatching, SeededSamplingIsReproducibleInAnyBatch) {
  const model::ModelConfig c = tiny_hybrid_config();
  auto m = synthetic_model(c, 43);
  auto sampled = [&](const std::string& id, uint64_t seed, uint64_t prompt_seed) {
    EngineRequest r = greedy_request(id, random_ids(6, c.vocab_size, prompt_seed), 12);
    r.params.temperature = 1.f;
    r.params.top_p = 0.9f;
    r.params.seed = seed;
    return r;
  };
  LLMEngine one(*m, nullptr, host_config(1, 64));
  const auto alone = run_all(one, {sampled("x", 5, 1)});
  LLMEngine many(*m, nullptr, host_config(4, 7));
  const auto batch = run_all(many, {sampled("a", 9, 2), sampled("x", 5, 1), sampled("b", 11, 3),
                                    sampled("c", 5, 4)});
  EXPECT_EQ(batch.at("x")[0], alone.at("x")[0]);
  EXPECT_EQ(batch.at("x")[0].size(), 12u);
  // Another seed gives another draw (a sampler that ignored the seed would pass the above).
  LLMEngine other(*m, nullptr, host_config(1, 64));
  EXPECT_NE(run_all(other, {sampled("x", 6, 1)}).at("x")[0], alone.at("x")[0]);
}

TEST(EngineBatching, AbortsAndPreemptionsLeaveNothingBehind) {
  const model::ModelConfig c = tiny_hybrid_config();
  auto m = synthetic_model(c, 47);
  // Few slots and blocks for many requests: the scheduler must queue, preempt and re-admit.
  EngineConfig ec = host_config(4, 5, 32);
  ec.executor.host_cache_bytes =
      4 * cache::MambaStatePool::bytes_per_slot(c, DType::F32) +
      12 * cache::KvBlockPool::bytes_per_block(c, 4, DType::F32);  // 12 blocks for 4 sequences
  LLMEngine e(*m, nullptr, ec);
  std::mt19937_64 rng(3);
  int64_t added = 0, aborted = 0, finished = 0;
  std::vector<std::string> live;
  for (int round = 0; round < 60; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % 12);
      EngineRequest r = greedy_request(fmt::format("q{}", added++), random_ids(len, c.vocab_size, rng()),
                                       1 + static_cast<int64_t>(rng() % 10));
      live.push_back(r.id);
      ASSERT_TRUE(e.add_request(std::move(r)));
    }
    if (rng() % 3 == 0 && !live.empty()) {
      const size_t i = rng() % live.size();
      e.abort_request(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      ++aborted;
    }
    for (const RequestOutput& o : e.step())
      if (o.finished) {
        ++finished;
        live.erase(std::remove(live.begin(), live.end(), o.request_id), live.end());
      }
  }
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step())
      if (o.finished) ++finished;
  EXPECT_EQ(finished, added);  // aborted requests report a finished output too
  EXPECT_GT(aborted, 0);
  const EngineStats s = e.stats();
  EXPECT_GT(s.preemptions, 0) << "the pools were meant to be too small for every request";
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ(s.mamba_usage, 0.0);
}

}  // namespace
}  // namespace strata::engine
