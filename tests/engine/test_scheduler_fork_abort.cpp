// Scheduler tests: n > 1 (the fork: slot copies, shared and copied KV blocks, reference
// counts) and abort in every state, over the fake runner.
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
                            int64_t block_size = 4) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 256;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.num_slots = num_slots;
  c.need_kv = num_blocks > 0;
  c.need_slots = num_slots > 0;
  return c;
}

FakeRequest request(const std::string& id, int64_t prompt_len, int64_t max_tokens, int32_t n = 1) {
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(id)));
  std::vector<int32_t> p(static_cast<size_t>(prompt_len));
  for (auto& t : p)
    t = static_cast<int32_t>(rng() % testing::kVocab);
  return FakeRequest{id, p, n, max_tokens};
}

const ScheduledChunk* find_chunk(const StepPlan& p, const std::string& k) {
  for (const ScheduledChunk& c : p.chunks)
    if (testing::key(c.seq) == k) return &c;
  return nullptr;
}

// --- n > 1 --------------------------------------------------------------------------------

struct ForkCase {
  int64_t prompt_len, block_size;
  int32_t n;
};

void PrintTo(const ForkCase& k, std::ostream* os) {
  *os << "prompt " << k.prompt_len << ", block size " << k.block_size << ", n " << k.n;
}

class Fork : public ::testing::TestWithParam<ForkCase> {};

TEST_P(Fork, ChildrenCopyTheStateShareFullBlocksAndCopyThePartialOne) {
  const ForkCase k = GetParam();
  const int64_t num_blocks = 40;
  FakeEngine e(make_config(8, 64, num_blocks, 8, k.block_size));
  ASSERT_TRUE(e.add(request("r", k.prompt_len, 5, k.n)));
  const int64_t S = k.prompt_len - 1;  // prompt tokens the parent prefills alone
  const int64_t full = S / k.block_size;
  const bool partial = S % k.block_size != 0;

  if (k.prompt_len > 1) {
    StepPlan p = e.plan();  // the parent's prefill of prompt[0, L-1): nothing sampled
    ASSERT_EQ(p.chunks.size(), 1u);
    EXPECT_EQ(testing::key(p.chunks[0].seq), "r/0");
    EXPECT_EQ(static_cast<int64_t>(p.chunks[0].tokens.size()), S);
    EXPECT_FALSE(p.chunks[0].samples);
    e.update(p, e.run(p));
  }
  StepPlan p = e.plan();  // the fork (or, for a one-token prompt, n independent prefills)
  ASSERT_EQ(p.chunks.size(), static_cast<size_t>(k.n));
  const ScheduledChunk* parent = find_chunk(p, "r/0");
  ASSERT_NE(parent, nullptr);
  const cache::BlockAllocator& ba = e.scheduler().block_allocator();
  size_t expected_slot_copies = 0, expected_block_copies = 0;
  for (int32_t c = 1; c < k.n; ++c) {
    const ScheduledChunk* child = find_chunk(p, "r/" + std::to_string(c));
    ASSERT_NE(child, nullptr);
    EXPECT_TRUE(child->samples);
    EXPECT_EQ(child->num_generated, 0);
    EXPECT_NE(child->slot, parent->slot);
    if (k.prompt_len == 1) {
      EXPECT_EQ(child->num_computed, 0);
      continue;
    }
    EXPECT_EQ(child->num_computed, S);
    ASSERT_EQ(child->tokens.size(), 1u);
    // The state after L-1 tokens goes from the parent's slot to the child's, before the step.
    ++expected_slot_copies;
    EXPECT_NE(std::find(p.slot_copies.begin(), p.slot_copies.end(),
                        std::make_pair(parent->slot, child->slot)),
              p.slot_copies.end());
    const auto& pb = parent->blocks->blocks();
    const auto& cb = child->blocks->blocks();
    ASSERT_EQ(cb.size(), pb.size());
    for (int64_t j = 0; j < full; ++j) {  // full prompt blocks: shared by all n
      EXPECT_EQ(cb[static_cast<size_t>(j)], pb[static_cast<size_t>(j)]);
      EXPECT_EQ(ba.ref_count(pb[static_cast<size_t>(j)]), k.n);
    }
    const auto last = static_cast<size_t>(full);  // the block position L-1 lands in
    EXPECT_NE(cb[last], pb[last]);
    EXPECT_EQ(ba.ref_count(cb[last]), 1);
    EXPECT_EQ(ba.ref_count(pb[last]), 1);
    if (partial) {  // it holds prompt tokens: copied before the step
      ++expected_block_copies;
      EXPECT_NE(std::find(p.block_copies.begin(), p.block_copies.end(),
                          std::make_pair(pb[last], cb[last])),
                p.block_copies.end());
    }
  }
  EXPECT_EQ(p.slot_copies.size(), expected_slot_copies);
  EXPECT_EQ(p.block_copies.size(), expected_block_copies);
  // Blocks in use: shared ones once, then one private block per completion.
  if (k.prompt_len > 1) {
    EXPECT_EQ(ba.num_used(), full + k.n);
  }
  e.update(p, e.run(p));
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), k.n);
  // The completions sampled with their own index: they differ (the fake's seeds differ).
  EXPECT_NE(e.output("r", 0), e.output("r", k.n - 1));
  e.expect_all_free();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, Fork,
                         ::testing::Values(ForkCase{9, 4, 3},     // L-1 = 8: whole blocks only
                                           ForkCase{10, 4, 3},    // a partial block to copy
                                           ForkCase{2, 4, 2},     // only a partial block
                                           ForkCase{5, 4, 2},     // L-1 = 4: one shared block
                                           ForkCase{1, 4, 3},     // nothing to share
                                           ForkCase{37, 16, 4},   // two shared, one copied
                                           ForkCase{13, 1, 2}));  // block size 1

TEST(Scheduler, ForkShortOfSlotsPreemptsANewerSequence) {
  // 3 slots: the parent and b hold one each; the fork needs two more: b (newer) goes.
  FakeEngine e(make_config(4, 64, 40, 3));
  ASSERT_TRUE(e.add(request("r", 9, 4, 3)));
  ASSERT_TRUE(e.add(request("b", 4, 4)));
  StepPlan p = e.plan();
  ASSERT_EQ(p.chunks.size(), 2u);
  e.update(p, e.run(p));
  p = e.plan();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(testing::key(p.preempted[0]), "b/0");
  EXPECT_EQ(p.chunks.size(), 3u);  // r/0, r/1, r/2
  EXPECT_EQ(p.slot_copies.size(), 2u);
  e.update(p, e.run(p));
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 4);
  e.expect_all_free();
}

TEST(Scheduler, ForkOfTheNewestYieldsToAnOlderSequence) {
  // a (older) runs; r's fork finds one free slot of the two it needs and nothing newer to
  // preempt: r preempts itself, a goes on, and r forks later.
  FakeEngine e(make_config(4, 64, 40, 3));
  ASSERT_TRUE(e.add(request("a", 4, 6)));
  ASSERT_TRUE(e.add(request("r", 5, 3, 3)));
  StepPlan p = e.plan();
  ASSERT_EQ(p.chunks.size(), 2u);
  e.update(p, e.run(p));
  p = e.plan();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(testing::key(p.preempted[0]), "r/0");
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(testing::key(p.chunks[0].seq), "a/0");
  e.update(p, e.run(p));
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 4);
  e.expect_all_free();
}

TEST(Scheduler, PreemptedChildIsRecomputedAlone) {
  // Few blocks: children grow past their shared prompt blocks and get preempted; each comes
  // back alone with prompt + its own output.
  FakeEngine e(make_config(4, 64, 9, 4));
  ASSERT_TRUE(e.add(request("r", 8, 12, 4)));
  e.run_to_completion();
  EXPECT_GE(e.scheduler().num_preemptions(), 1);
  EXPECT_GE(e.stats().readmissions, 1);
  EXPECT_EQ(e.expect_reference_outputs(), 4);
  e.expect_all_free();
}

// --- abort in every state -----------------------------------------------------------------

enum class AbortAt {
  Waiting,
  MidPrefill,
  MidDecode,
  Preempted,
  BeforeFork,
  AfterFork,
  WhileStepRuns,  // between schedule() and update()
  Finished,       // some completions finished, others not
};

struct AbortCase {
  const char* name;
  AbortAt at;
};

void PrintTo(const AbortCase& k, std::ostream* os) {
  *os << k.name;
}

class Abort : public ::testing::TestWithParam<AbortCase> {};

TEST_P(Abort, FreesEverythingAndLeavesTheOthersUntouched) {
  const AbortAt at = GetParam().at;
  // Budget 8, block size 4. "v" (the victim) is the newest; "a" and "b" run before it.
  SchedulerConfig cfg = make_config(4, 8, 40, 8);
  if (at == AbortAt::Waiting) cfg.num_slots = 1;  // v waits behind a
  if (at == AbortAt::Preempted) cfg.num_blocks = 6;
  FakeEngine e(cfg);
  const bool fork =
      at == AbortAt::BeforeFork || at == AbortAt::AfterFork || at == AbortAt::Finished;
  ASSERT_TRUE(e.add(request("a", 6, 10)));
  ASSERT_TRUE(e.add(request("b", 5, 10)));
  ASSERT_TRUE(e.add(request("v", at == AbortAt::MidPrefill ? 30 : 6, 10, fork ? 3 : 1)));
  auto step_until = [&](auto done) {
    for (int i = 0; i < 100 && !done(); ++i)
      e.step();
    ASSERT_TRUE(done());
  };
  switch (at) {
    case AbortAt::Waiting:
      e.step();
      e.step();
      EXPECT_EQ(e.first_step("v"), -1);
      break;
    case AbortAt::MidPrefill:
      step_until([&] { return e.computed("v/0") > 0; });
      EXPECT_LT(e.computed("v/0"), 30);
      break;
    case AbortAt::MidDecode:
      step_until([&] { return e.scheduler().output_tokens({"v", 0}).size() >= 2; });
      break;
    case AbortAt::Preempted:  // 6 blocks: when a needs its third block, v is the newest
      step_until([&] { return e.was_preempted("v/0"); });
      EXPECT_EQ(e.computed("v/0"), 0);
      break;
    case AbortAt::BeforeFork:  // the parent has prefilled prompt[0, 5)
      step_until([&] { return e.computed("v/0") == 5; });
      EXPECT_EQ(e.stats().forks, 0);
      break;
    case AbortAt::AfterFork:
      step_until([&] { return e.stats().forks == 2; });
      break;
    case AbortAt::Finished:  // one completion ends early (say a stop string), two go on
      step_until([&] { return e.stats().forks == 2; });
      e.step();
      e.scheduler().finish({"v", 1});
      break;
    case AbortAt::WhileStepRuns: {
      step_until([&] { return e.computed("v/0") > 0; });
      const StepPlan p = e.plan();
      ASSERT_NE(find_chunk(p, "v/0"), nullptr);
      const auto sampled = e.run(p);
      e.abort("v");
      e.update(p, sampled);  // v's chunk is skipped; the others advance
      break;
    }
  }
  if (at != AbortAt::WhileStepRuns) e.abort("v");
  EXPECT_FALSE(e.scheduler().abort("v"));  // gone
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 2);  // the two survivors, as if alone
  e.expect_all_free();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, Abort,
                         ::testing::Values(AbortCase{"Waiting", AbortAt::Waiting},
                                           AbortCase{"MidPrefill", AbortAt::MidPrefill},
                                           AbortCase{"MidDecode", AbortAt::MidDecode},
                                           AbortCase{"Preempted", AbortAt::Preempted},
                                           AbortCase{"BeforeFork", AbortAt::BeforeFork},
                                           AbortCase{"AfterFork", AbortAt::AfterFork},
                                           AbortCase{"WhileStepRuns", AbortAt::WhileStepRuns},
                                           AbortCase{"Finished", AbortAt::Finished}),
                         [](const ::testing::TestParamInfo<AbortCase>& i) {
                           return std::string(i.param.name);
                         });

TEST(Scheduler, AbortEverythingAtOnceInEveryStateFreesEveryBlockAndSlot) {
  // Many requests in mixed states (waiting, prefilling, decoding, forked, preempted), then
  // all aborted with no step in between.
  FakeEngine e(make_config(6, 16, 14, 6));
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(e.add(request("q" + std::to_string(i), 3 + 5 * (i % 4), 20, i % 3 == 0 ? 2 : 1)));
  for (int s = 0; s < 9; ++s)
    e.step();
  EXPECT_GT(e.scheduler().num_running(), 0);
  EXPECT_GT(e.scheduler().num_waiting(), 0);
  int64_t aborted = 0;
  for (int i = 0; i < 12; ++i)
    aborted += e.scheduler().abort("q" + std::to_string(i));
  EXPECT_GT(aborted, 6);
  e.expect_all_free();
}

TEST(Scheduler, StalePlanDoesNotTouchAReusedId) {
  // v is aborted while its step runs and a new request reuses the id before update(): the
  // stale chunk must not advance the new sequence.
  FakeEngine e(make_config(4, 64, 40, 8));
  ASSERT_TRUE(e.add(request("v", 6, 4)));
  const StepPlan p = e.plan();
  const auto sampled = e.run(p);
  e.abort("v");
  ASSERT_TRUE(e.add(request("v", 7, 4)));
  e.update(p, sampled);
  EXPECT_TRUE(e.scheduler().output_tokens({"v", 0}).empty());
  e.run_to_completion();
  EXPECT_EQ(e.expect_reference_outputs(), 1);
  e.expect_all_free();
}

}  // namespace
}  // namespace strata::engine
