// Scheduler tests, table-driven, over the fake runner (scheduler_fake_runner.h): chunk
// boundaries, budget splits, max_num_seqs, preemption and re-admission, FIFO, max_model_len.
// n > 1 and abort are in test_scheduler_fork_abort.cpp, the random leak test in
// test_scheduler_random.cpp.
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "engine/scheduler.h"
#include "scheduler_fake_runner.h"

namespace strata::engine {
namespace {

using testing::FakeEngine;
using testing::FakeRequest;

SchedulerConfig make_config(int64_t max_seqs, int64_t budget, int64_t num_blocks, int64_t num_slots,
                            int64_t block_size = 4, int64_t max_len = 256) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.max_model_len = max_len;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.num_slots = num_slots;
  c.need_kv = num_blocks > 0;
  c.need_slots = num_slots > 0;
  return c;
}

std::vector<int32_t> random_prompt(int64_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p)
    t = static_cast<int32_t>(rng() % testing::kVocab);
  return p;
}

FakeRequest request(const std::string& id, int64_t prompt_len, int64_t max_tokens, int32_t n = 1) {
  return FakeRequest{id,
                     random_prompt(prompt_len, static_cast<uint32_t>(std::hash<std::string>{}(id))),
                     n, max_tokens};
}

// One chunk of a plan as the tables below spell it: "id/index", num_computed, tokens, samples.
struct Row {
  std::string seq;
  int64_t num_computed, len;
  bool samples;
};

void expect_plan(const StepPlan& p, const std::vector<Row>& want, int64_t step) {
  ASSERT_EQ(p.chunks.size(), want.size()) << "step " << step;
  for (size_t i = 0; i < want.size(); ++i) {
    const ScheduledChunk& c = p.chunks[i];
    EXPECT_EQ(testing::key(c.seq), want[i].seq) << "step " << step << " chunk " << i;
    EXPECT_EQ(c.num_computed, want[i].num_computed) << "step " << step << " chunk " << i;
    EXPECT_EQ(static_cast<int64_t>(c.tokens.size()), want[i].len)
        << "step " << step << " chunk " << i;
    EXPECT_EQ(c.samples, want[i].samples) << "step " << step << " chunk " << i;
  }
}

// --- chunk boundaries: one request alone, every chunk size --------------------------------

struct ChunkCase {
  int64_t prompt_len, budget, block_size;
};

void PrintTo(const ChunkCase& k, std::ostream* os) {
  *os << "prompt " << k.prompt_len << ", budget " << k.budget << ", block size " << k.block_size;
}

class ChunkBoundaries : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(ChunkBoundaries, ChunksFillTheBudgetAndBlocksFollowExactly) {
  const ChunkCase k = GetParam();
  const int64_t max_tokens = 3, num_blocks = 64;
  FakeEngine e(make_config(1, k.budget, num_blocks, 2, k.block_size));
  ASSERT_TRUE(e.add(request("a", k.prompt_len, max_tokens)));
  int64_t computed = 0, steps = 0, generated = 0;
  while (e.scheduler().has_work()) {
    const StepPlan p = e.plan();
    ASSERT_EQ(p.chunks.size(), 1u);
    const ScheduledChunk& c = p.chunks[0];
    const int64_t known = k.prompt_len + generated;
    const int64_t want = computed < k.prompt_len ? std::min(k.prompt_len - computed, k.budget) : 1;
    EXPECT_EQ(c.num_computed, computed) << "step " << steps;
    EXPECT_EQ(static_cast<int64_t>(c.tokens.size()), want) << "step " << steps;
    EXPECT_EQ(c.samples, computed + want == known) << "step " << steps;
    const int64_t ctx = computed + want;
    EXPECT_EQ(e.scheduler().num_free_blocks(),
              num_blocks - (ctx + k.block_size - 1) / k.block_size);
    e.update(p, e.run(p));
    computed = ctx;
    generated += c.samples;
    ++steps;
  }
  const int64_t prefill_steps = (k.prompt_len + k.budget - 1) / k.budget;
  EXPECT_EQ(steps, prefill_steps + max_tokens - 1);
  EXPECT_EQ(e.expect_reference_outputs(), 1);
  e.expect_all_free();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, ChunkBoundaries,
                         ::testing::Values(ChunkCase{1, 1, 4}, ChunkCase{4, 4, 4},
                                           ChunkCase{5, 4, 4}, ChunkCase{16, 5, 4},
                                           ChunkCase{17, 16, 16}, ChunkCase{33, 8, 16},
                                           ChunkCase{7, 100, 16}, ChunkCase{64, 64, 16},
                                           ChunkCase{50, 3, 1}));

// --- budget splits: decodes first, then continuing prefills, then admissions by FIFO --------

TEST(Scheduler, BudgetSplitsDecodesThenChunksThenAdmissions) {
  FakeEngine e(make_config(4, 8, 64, 8));
  ASSERT_TRUE(e.add(request("a", 3, 10)));
  ASSERT_TRUE(e.add(request("b", 20, 10)));
  ASSERT_TRUE(e.add(request("c", 5, 10)));
  ASSERT_TRUE(e.add(request("d", 9, 10)));
  const std::vector<std::vector<Row>> steps = {
      {{"a/0", 0, 3, true}, {"b/0", 0, 5, false}},   // c must wait: no budget
      {{"a/0", 3, 1, true}, {"b/0", 5, 7, false}},   // decode first
      {{"a/0", 4, 1, true}, {"b/0", 12, 7, false}},  // b at 19 of 20
      {{"a/0", 5, 1, true}, {"b/0", 19, 1, true}, {"c/0", 0, 5, true}, {"d/0", 0, 1, false}},
      {{"a/0", 6, 1, true}, {"b/0", 20, 1, true}, {"c/0", 5, 1, true}, {"d/0", 1, 5, false}},
      {{"a/0", 7, 1, true}, {"b/0", 21, 1, true}, {"c/0", 6, 1, true}, {"d/0", 6, 3, true}},
      {{"a/0", 8, 1, true}, {"b/0", 22, 1, true}, {"c/0", 7, 1, true}, {"d/0", 9, 1, true}},
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepPlan p = e.plan();
    expect_plan(p, steps[s], static_cast<int64_t>(s));
    e.update(p, e.run(p));
  }
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 4);
  e.expect_all_free();
}

TEST(Scheduler, MaxNumSeqsBoundsRunningSequences) {
  FakeEngine e(make_config(2, 64, 64, 8));
  for (const char* id : {"a", "b", "c", "d"})
    ASSERT_TRUE(e.add(request(id, 4, 3)));
  const std::vector<std::vector<Row>> steps = {
      {{"a/0", 0, 4, true}, {"b/0", 0, 4, true}},
      {{"a/0", 4, 1, true}, {"b/0", 4, 1, true}},
      {{"a/0", 5, 1, true}, {"b/0", 5, 1, true}},  // a and b finish (3 tokens)
      {{"c/0", 0, 4, true}, {"d/0", 0, 4, true}},
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepPlan p = e.plan();
    expect_plan(p, steps[s], static_cast<int64_t>(s));
    EXPECT_LE(e.scheduler().num_running(), 2);
    e.update(p, e.run(p));
  }
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 4);
  e.expect_all_free();
}

// --- preemption by recompute ------------------------------------------------------------

TEST(Scheduler, PreemptsTheNewestAndReadmitsItWithItsOutput) {
  // 6 blocks of 4: three 6-token prompts take 2 blocks each; at length 9 each needs a third.
  FakeEngine e(make_config(4, 64, 6, 8));
  for (const char* id : {"a", "b", "c"})
    ASSERT_TRUE(e.add(request(id, 6, 10)));
  int64_t step = 0;
  bool saw_preemption = false, saw_readmission = false;
  while (e.scheduler().has_work()) {
    const StepPlan p = e.plan();
    if (!p.preempted.empty() && !saw_preemption) {
      saw_preemption = true;
      // Step 3 (0-based): a and b decode position 8 and need a third block each; c, the newest,
      // is preempted for them.
      EXPECT_EQ(step, 3);
      ASSERT_EQ(p.preempted.size(), 1u);
      EXPECT_EQ(testing::key(p.preempted[0]), "c/0");
      expect_plan(p, {{"a/0", 8, 1, true}, {"b/0", 8, 1, true}}, step);
    }
    for (const ScheduledChunk& c : p.chunks)
      if (saw_preemption && testing::key(c.seq) == "c/0" && c.num_computed == 0) {
        saw_readmission = true;
        // The prompt and the 3 tokens it had generated are recomputed; sampling continues at 3.
        EXPECT_EQ(c.tokens.size(), 9u);
        EXPECT_EQ(c.num_generated, 3);
        EXPECT_TRUE(c.samples);
      }
    e.update(p, e.run(p));
    ASSERT_LT(++step, 1000);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_TRUE(saw_readmission);
  EXPECT_GE(e.scheduler().num_preemptions(), 1);
  EXPECT_EQ(e.expect_reference_outputs(), 3);  // equal to the runs without preemption
  e.expect_all_free();
}

TEST(Scheduler, NewerSequenceYieldsItsBlocksToAnOlderOne) {
  // a decodes and grows; b (newer) prefills in chunks: whenever blocks run out, b is preempted
  // (by a, or by itself when it is the one short), never a.
  FakeEngine e(make_config(2, 4, 5, 4));
  ASSERT_TRUE(e.add(request("a", 4, 12)));  // grows to 15 tokens: 4 blocks
  ASSERT_TRUE(e.add(request("b", 8, 6)));   // up to 13 tokens: 4 blocks
  int64_t b_preempted = 0;
  for (int64_t step = 0; e.scheduler().has_work(); ++step) {
    ASSERT_LT(step, 1000);
    const StepPlan p = e.plan();
    for (const SeqRef& s : p.preempted) {
      EXPECT_EQ(testing::key(s), "b/0");
      ++b_preempted;
    }
    e.update(p, e.run(p));
  }
  EXPECT_GE(b_preempted, 1);
  EXPECT_EQ(e.scheduler().num_preemptions(), b_preempted);
  EXPECT_EQ(e.expect_reference_outputs(), 2);
  e.expect_all_free();
}

TEST(Scheduler, OverlappedSchedulingGivesTheSameOutputs) {
  // Step t+1 is planned while step t runs: decode rows carry kPendingToken for the id still on
  // the device; preemptions and forks in between; outputs equal the references.
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "synchronous");
    FakeEngine e(make_config(4, 16, 12, 6), /*stop_below=*/40);
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(e.add(request("q" + std::to_string(i), 2 + 3 * i, 9, i % 3 == 1 ? 2 : 1)));
    if (pipelined) {
      e.run_pipelined_to_completion();
      EXPECT_GT(e.stats().pending_tokens, 20);
    } else {
      e.run_to_completion();
      EXPECT_EQ(e.stats().pending_tokens, 0);
    }
    EXPECT_GE(e.scheduler().num_preemptions(), 1);
    EXPECT_GE(e.stats().forks, 1);
    EXPECT_EQ(e.expect_reference_outputs(), 13);
    e.expect_all_free();
  }
}

TEST(Scheduler, OverlappedPlanCarriesThePendingIdOnlyInDecodeRows) {
  FakeEngine e(make_config(2, 16, 12, 4));
  ASSERT_TRUE(e.add(request("a", 5, 4)));
  const StepPlan p0 = e.plan();  // a's prompt: samples
  const auto s0 = e.run(p0);
  e.advance(p0);
  EXPECT_EQ(e.scheduler().output_tokens({"a", 0}), (std::vector<int32_t>{kPendingToken}));
  const StepPlan p1 = e.plan();  // before p0 is committed
  ASSERT_EQ(p1.chunks.size(), 1u);
  EXPECT_EQ(p1.chunks[0].num_computed, 5);
  EXPECT_EQ(p1.chunks[0].tokens, (std::vector<int32_t>{kPendingToken}));
  EXPECT_EQ(p1.chunks[0].num_generated, 1);
  const auto s1 = e.run(p1);
  e.advance(p1);
  e.commit(p0, s0);
  EXPECT_EQ(e.scheduler().output_tokens({"a", 0}), (std::vector<int32_t>{s0[0], kPendingToken}));
  EXPECT_THROW(e.scheduler().commit(p0, s0), Error);  // committed twice
  e.commit(p1, s1);
  EXPECT_EQ(e.scheduler().output_tokens({"a", 0}), (std::vector<int32_t>{s0[0], s1[0]}));
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 1);
  e.expect_all_free();
}

// --- FIFO -------------------------------------------------------------------------------

TEST(Scheduler, LaterRequestNeverOvertakesAnEarlierOneThatWaitsForBlocks) {
  FakeEngine f(make_config(4, 64, 8, 8));
  ASSERT_TRUE(f.add(request("a", 16, 4)));  // 4 blocks, grows to 5
  ASSERT_TRUE(f.add(request("b", 20, 2)));  // 5 blocks: waits until a is done
  ASSERT_TRUE(f.add(request("c", 4, 2)));   // 1 block would fit, but must not overtake b
  const StepPlan first = f.plan();
  expect_plan(first, {{"a/0", 0, 16, true}}, 0);
  f.update(first, f.run(first));
  f.run_to_completion();
  EXPECT_GT(f.first_step("c"), 0);
  EXPECT_LT(f.first_step("a"), f.first_step("b"));
  EXPECT_LE(f.first_step("b"), f.first_step("c"));
  EXPECT_EQ(f.expect_reference_outputs(), 3);
  f.expect_all_free();
}

TEST(Scheduler, SeatsOfAnNRequestKeepItsPlaceInTheQueue) {
  // max_num_seqs 3: a (n = 1) runs; b needs 3 seats and waits; c (n = 1) would fit but waits.
  FakeEngine e(make_config(3, 64, 64, 8));
  ASSERT_TRUE(e.add(request("a", 4, 6)));
  ASSERT_TRUE(e.add(request("b", 5, 3, 3)));
  ASSERT_TRUE(e.add(request("c", 4, 2)));
  e.run_to_completion();
  EXPECT_LT(e.first_step("a"), e.first_step("b"));
  EXPECT_LE(e.first_step("b"), e.first_step("c"));
  EXPECT_EQ(e.expect_reference_outputs(), 5);
  e.expect_all_free();
}

// --- max_model_len and max_tokens: never scheduled beyond ---------------------------------

TEST(Scheduler, NeverSchedulesBeyondMaxModelLenOrMaxTokens) {
  for (const bool length_bound : {true, false}) {
    SCOPED_TRACE(length_bound ? "max_model_len" : "max_tokens");
    // prompt 10 + max_tokens 6 == max_model_len 16, or max_tokens 4 well within it.
    Scheduler s(make_config(2, 64, 16, 4, 4, 16));
    EngineRequest r;
    r.id = "a";
    r.prompt = random_prompt(10, 1);
    r.params.max_tokens = length_bound ? 6 : 4;
    ASSERT_TRUE(s.add(r));
    int64_t steps = 0;
    for (;; ++steps) {  // an engine that "forgets" to call finish()
      const StepPlan p = s.schedule();
      if (p.empty()) break;
      for (const ScheduledChunk& c : p.chunks)
        EXPECT_LE(c.num_computed + static_cast<int64_t>(c.tokens.size()) + 1, 16);
      s.update(p, std::vector<int32_t>(p.chunks.size(), 7));
      ASSERT_LT(steps, 100);
    }
    EXPECT_EQ(static_cast<int64_t>(s.output_tokens({"a", 0}).size()), r.params.max_tokens);
    EXPECT_EQ(steps, r.params.max_tokens);
    EXPECT_TRUE(s.has_work());  // holds its blocks until the engine finishes it
    s.finish({"a", 0});
    EXPECT_FALSE(s.has_work());
    EXPECT_EQ(s.num_free_blocks(), 16);
    EXPECT_EQ(s.num_free_slots(), 4);
  }
}

// --- validation ---------------------------------------------------------------------------

TEST(Scheduler, RefusesRequestsThatCanNeverRunAndConfigsItCannotHonour) {
  Scheduler s(make_config(4, 64, 10, 3, 4, 32));
  EngineRequest r;
  r.id = "x";
  r.prompt = random_prompt(8, 2);
  r.params.max_tokens = 4;
  auto with = [&](auto change) {
    EngineRequest q = r;
    change(q);
    return q;
  };
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.prompt.clear(); })), Error);
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.params.max_tokens = 25; })),
               Error);  // 8 + 25 > 32
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.params.max_tokens = 0; })), Error);
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.params.n = 5; })), Error);  // > max_num_seqs
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.params.n = 4; })), Error);  // > 3 slots
  EXPECT_THROW(s.add(with([](EngineRequest& q) { q.params.n = 0; })), Error);
  // 20 + 12 tokens need ceil(31 / 4) = 8 blocks (fits); a fork of 3 needs ceil(20/4) + 2 = 7.
  EXPECT_NO_THROW(s.add(with([](EngineRequest& q) {
    q.id = "fits";
    q.prompt = random_prompt(20, 3);
    q.params.max_tokens = 12;
    q.params.n = 3;
  })));
  Scheduler small(make_config(4, 64, 5, 3, 4, 32));
  EXPECT_THROW(small.add(with([](EngineRequest& q) { q.params.max_tokens = 20; })), Error);
  EXPECT_TRUE(s.add(r));
  EXPECT_THROW(s.add(r), Error);  // duplicate live id
  EXPECT_EQ(s.num_waiting(), 2);

  SchedulerConfig bounded = make_config(4, 64, 10, 3);
  bounded.max_waiting = 1;
  Scheduler b(bounded);
  EXPECT_TRUE(b.add(r));
  EXPECT_FALSE(b.add(with([](EngineRequest& q) { q.id = "y"; })));  // queue full: refused
  EXPECT_EQ(b.num_waiting(), 1);

  EXPECT_THROW(Scheduler(make_config(0, 64, 10, 3)), Error);
  EXPECT_THROW(Scheduler(make_config(8, 4, 10, 3)), Error);  // budget < max_num_seqs
  SchedulerConfig no_blocks = make_config(4, 64, 10, 3);
  no_blocks.num_blocks = 0;
  EXPECT_THROW(Scheduler{no_blocks}, Error);
}

}  // namespace
}  // namespace strata::engine
