// The leak test (issue 9 part 9): 1,000 random requests (random prompt lengths, max_tokens,
// n, stop ids) arriving over time, random aborts (between steps and while a step runs), pools
// small enough to force preemptions; every plan is checked by the fake runner, every finished
// completion equals its reference, and at the end every block and slot is back in its pool
// with every reference count zero.
#include <gtest/gtest.h>

#include <random>

#include "engine/scheduler.h"
#include "scheduler_fake_runner.h"

namespace strata::engine {
namespace {

using testing::FakeEngine;
using testing::FakeRequest;

struct LeakCase {
  const char* name;
  bool kv, slots;
  int64_t num_blocks, num_slots, block_size, max_num_seqs, budget;
  uint32_t seed;
  bool pipelined = false;  // overlapped: step t+1 planned before step t is committed
};

void PrintTo(const LeakCase& k, std::ostream* os) {
  *os << k.name;
}

class Leak : public ::testing::TestWithParam<LeakCase> {};

TEST_P(Leak, ThousandRandomRequestsLeaveNothingBehind) {
  const LeakCase k = GetParam();
  SchedulerConfig cfg;
  cfg.max_num_seqs = k.max_num_seqs;
  cfg.max_num_batched_tokens = k.budget;
  cfg.max_model_len = 96;
  cfg.block_size = k.block_size;
  cfg.need_kv = k.kv;
  cfg.need_slots = k.slots;
  cfg.num_blocks = k.kv ? k.num_blocks : 0;
  cfg.num_slots = k.slots ? k.num_slots : 0;
  const int32_t stop_below = 15;  // ~1.5% of tokens end a completion early
  FakeEngine e(cfg, stop_below);
  std::mt19937 rng(k.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };

  const int total = 1000;
  int added = 0, refused = 0;
  std::vector<std::string> live;  // ids that may still be aborted
  int64_t step = 0;
  testing::InFlight in_flight;  // pipelined only
  while (added < total || e.scheduler().has_work() || in_flight.active) {
    ASSERT_LT(step, 100000) << "no progress";
    // Arrivals: bursts of up to 4 requests, some steps none.
    for (int64_t a = uniform(0, 4) - 1; a > 0 && added < total; --a) {
      FakeRequest r;
      r.id = "r" + std::to_string(added);
      const int64_t L = uniform(1, 100) <= 10 ? uniform(40, 60) : uniform(1, 24);
      r.prompt.resize(static_cast<size_t>(L));
      for (auto& t : r.prompt)
        t = static_cast<int32_t>(uniform(0, testing::kVocab - 1));
      r.max_tokens = uniform(1, 30);
      const int64_t roll = uniform(1, 100);
      r.n = roll <= 70 ? 1 : roll <= 85 ? 2 : roll <= 95 ? 3 : 4;
      if (e.add(r)) {
        live.push_back(r.id);
      } else {
        ++refused;
      }
      ++added;
    }
    // Aborts between steps: ~2% of steps.
    if (!live.empty() && uniform(1, 100) <= 2) {
      const size_t i = static_cast<size_t>(uniform(0, static_cast<int64_t>(live.size()) - 1));
      if (e.scheduler().abort(live[i])) e.abort_recorded(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    StepPlan p = e.plan();
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<int32_t> sampled = e.run(p);
    if (k.pipelined) e.advance(p);
    // Aborts while the step runs: ~1% of steps, a request in this very plan.
    if (!p.chunks.empty() && uniform(1, 100) <= 1) {
      const std::string id =
          p.chunks[static_cast<size_t>(uniform(0, static_cast<int64_t>(p.chunks.size()) - 1))]
              .seq.request_id;
      if (e.scheduler().abort(id)) e.abort_recorded(id);
    }
    if (k.pipelined) {
      if (in_flight.active) e.commit(in_flight.plan, in_flight.sampled);
      in_flight.active = !p.empty();
      in_flight.plan = std::move(p);
      in_flight.sampled = std::move(sampled);
    } else {
      e.update(p, sampled);
    }
    if (::testing::Test::HasFailure()) return;
    ++step;
  }
  EXPECT_EQ(refused, 0);
  const testing::RunStats& s = e.stats();
  const int64_t compared = e.expect_reference_outputs();
  e.expect_all_free();
  // The run covered what it is meant to (counts printed for the report).
  std::printf(
      "[%s] steps %lld, chunks %lld (decode %lld, continued prefill %lld, first %lld), "
      "preemptions %lld, re-admissions %lld, forks %lld, block copies %lld, shared block "
      "refs %lld, finished %lld, aborted %lld, outputs compared %lld, KV reads checked "
      "%lld, state checks %lld, most chunks in a step %lld, pending tokens %lld\n",
      k.name, static_cast<long long>(s.steps), static_cast<long long>(s.chunks),
      static_cast<long long>(s.decode_rows), static_cast<long long>(s.continued_prefills),
      static_cast<long long>(s.first_chunks),
      static_cast<long long>(e.scheduler().num_preemptions()),
      static_cast<long long>(s.readmissions), static_cast<long long>(s.forks),
      static_cast<long long>(s.block_copies), static_cast<long long>(s.shared_block_refs),
      static_cast<long long>(s.finished), static_cast<long long>(s.aborted),
      static_cast<long long>(compared), static_cast<long long>(s.kv_reads_checked),
      static_cast<long long>(s.state_checks), static_cast<long long>(s.max_chunks_in_step),
      static_cast<long long>(s.pending_tokens));
  EXPECT_GT(e.scheduler().num_preemptions(), 20);
  EXPECT_GT(s.readmissions, 20);
  EXPECT_GT(s.forks, 100);
  EXPECT_GT(s.continued_prefills, 100);
  EXPECT_GT(s.aborted, 10);
  EXPECT_GT(compared, 1000);
  if (k.kv) {
    if (k.block_size > 1) {  // block size 1 has no partial blocks to copy
      EXPECT_GT(s.block_copies, 20);
    }
    EXPECT_GT(s.shared_block_refs, 100);
    EXPECT_GT(s.kv_reads_checked, 100000);
  }
  if (k.slots) {
    EXPECT_GT(s.state_checks, 10000);
  }
  if (k.pipelined) {
    EXPECT_GT(s.pending_tokens, 10000);
  } else {
    EXPECT_EQ(s.pending_tokens, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scheduler, Leak,
    ::testing::Values(
        // Tight KV blocks: preemption mostly for blocks.
        LeakCase{"blocks", true, true, 40, 16, 4, 8, 32, 1},
        // Tight slots (the forks run short), plenty of blocks.
        LeakCase{"slots", true, true, 400, 6, 4, 8, 32, 2},
        // Attention only (no Mamba slots), block size 1.
        LeakCase{"kv_only", true, false, 120, 0, 1, 6, 16, 3},
        // Mamba only (no KV): nothing but slots and seats to run out of.
        LeakCase{"slots_only", false, true, 0, 5, 16, 8, 24, 4},
        // Overlapped scheduling (advance / schedule / commit) over tight blocks and slots.
        LeakCase{"blocks_pipelined", true, true, 40, 16, 4, 8, 32, 5, true},
        LeakCase{"slots_pipelined", true, true, 400, 6, 4, 8, 32, 6, true}),
    [](const ::testing::TestParamInfo<LeakCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace strata::engine
