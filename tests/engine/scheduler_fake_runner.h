// A fake model runner and engine loop for the scheduler tests: no tensors, but the same
// contract as the executor. The "model" is a hash chain: a Mamba slot holds the hash of every
// token the sequence has run through it (so a slot that was not copied, was shared, or was
// handed out twice gives a wrong state), every KV position holds hash(token, position) (so a
// block table that is short, shared where it is written, or a block copy that was missed reads
// a wrong entry), and the next token is a hash of the state and the completion index. Each
// step checks the plan's invariants against the test's own record of every sequence, and the
// outputs are compared with a direct generation loop that knows nothing of scheduling.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace strata::engine::testing {

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t mix(uint64_t h, uint64_t v) {
  return splitmix(h ^ splitmix(v));
}

constexpr uint64_t kStateSeed = 0x5eed5eedull;
constexpr int64_t kVocab = 1000;

// Mamba-like state after running `n` tokens from zero state.
inline uint64_t fold(const std::vector<int32_t>& tokens, int64_t n) {
  uint64_t h = kStateSeed;
  for (int64_t i = 0; i < n; ++i)
    h = mix(h, static_cast<uint64_t>(tokens[static_cast<size_t>(i)]));
  return h;
}
inline uint64_t kv_entry(int32_t token, int64_t pos) {
  return mix(mix(0xca11ab1eull, static_cast<uint64_t>(token)), static_cast<uint64_t>(pos)) | 1;
}
inline int32_t sample_token(uint64_t state, int32_t completion) {
  return static_cast<int32_t>(mix(state, 1000003ull + static_cast<uint64_t>(completion)) %
                              static_cast<uint64_t>(kVocab));
}

// A step launched but not yet committed (overlapped scheduling).
struct InFlight {
  StepPlan plan;
  std::vector<int32_t> sampled;
  bool active = false;
};

struct FakeRequest {
  std::string id;
  std::vector<int32_t> prompt;
  int32_t n = 1;
  int64_t max_tokens = 8;
};

// The engine's stop rule in these tests: max_tokens, max_model_len, or a "stop id" below
// `stop_below` (0: none).
inline bool stops(int64_t num_output, int64_t length, int32_t last, int64_t max_tokens,
                  int64_t max_model_len, int32_t stop_below) {
  return num_output >= max_tokens || length >= max_model_len || last < stop_below;
}

// What completion `index` of `r` generates when it runs alone: the reference.
inline std::vector<int32_t> reference_output(const FakeRequest& r, int32_t index,
                                             int64_t max_model_len, int32_t stop_below) {
  std::vector<int32_t> tokens = r.prompt;
  std::vector<int32_t> out;
  uint64_t state = fold(tokens, static_cast<int64_t>(tokens.size()));
  while (true) {
    const int32_t t = sample_token(state, index);
    out.push_back(t);
    tokens.push_back(t);
    if (stops(static_cast<int64_t>(out.size()), static_cast<int64_t>(tokens.size()), t,
              r.max_tokens, max_model_len, stop_below))
      return out;
    state = mix(state, static_cast<uint64_t>(t));
  }
}

inline std::string key(const SeqRef& s) {
  return s.request_id + "/" + std::to_string(s.index);
}

// Counts of what a run exercised (tests assert these are > 0 where they mean to cover it).
struct RunStats {
  int64_t steps = 0, chunks = 0, decode_rows = 0, continued_prefills = 0, first_chunks = 0;
  int64_t readmissions = 0, forks = 0, block_copies = 0, shared_block_refs = 0;
  int64_t finished = 0, aborted = 0, kv_reads_checked = 0, state_checks = 0;
  int64_t max_chunks_in_step = 0, pending_tokens = 0;
};

class FakeEngine {
 public:
  explicit FakeEngine(const SchedulerConfig& cfg, int32_t stop_below = 0)
      : cfg_(cfg), sched_(cfg), stop_below_(stop_below) {
    kv_.assign(static_cast<size_t>((cfg.need_kv ? cfg.num_blocks : 0) * cfg.block_size), 0);
    slot_state_.assign(static_cast<size_t>(cfg.need_slots ? cfg.num_slots : 0), 0);
  }

  Scheduler& scheduler() { return sched_; }
  const RunStats& stats() const { return stats_; }

  bool add(const FakeRequest& r) {
    EngineRequest e;
    e.id = r.id;
    e.prompt = r.prompt;
    e.params.n = r.n;
    e.params.max_tokens = r.max_tokens;
    if (!sched_.add(e)) return false;
    if (auto old = reqs_.find(r.id); old != reqs_.end())  // an id reused after its abort
      for (int32_t c = 0; c < old->second.req.n; ++c)
        seqs_.erase(key(SeqRef{r.id, c}));
    ReqRecord& rec = reqs_[r.id];
    rec = ReqRecord{};
    rec.req = r;
    rec.arrival = next_arrival_++;
    rec.live = r.n;
    return true;
  }

  void abort(const std::string& id) {
    EXPECT_TRUE(sched_.abort(id)) << id;
    abort_recorded(id);
  }
  // The test called Scheduler::abort itself (and it returned true).
  void abort_recorded(const std::string& id) {
    auto it = reqs_.find(id);
    ASSERT_NE(it, reqs_.end());
    it->second.aborted = true;
    ++stats_.aborted;
  }

  // The plan of the next step, checked; the model has not run it yet.
  StepPlan plan() {
    StepPlan p = sched_.schedule();
    check_plan(p);
    return p;
  }

  // Runs the plan on the fake device and returns the sampled ids (-1 where nothing sampled).
  std::vector<int32_t> run(const StepPlan& p) {
    for (auto [from, to] : p.slot_copies)
      slot_state_[static_cast<size_t>(to)] = slot_state_[static_cast<size_t>(from)];
    const int64_t bs = cfg_.block_size;
    for (auto [from, to] : p.block_copies)
      std::copy_n(kv_.begin() + from * bs, bs, kv_.begin() + to * bs);
    std::vector<int32_t> sampled;
    for (const ScheduledChunk& c : p.chunks) {
      SeqRecord& rec = seqs_.at(key(c.seq));
      std::vector<int32_t> toks = c.tokens;
      for (size_t i = 0; i < toks.size(); ++i) {
        if (toks[i] != kPendingToken) continue;
        // The executor's part of overlapped scheduling: the id the previous step sampled for
        // this sequence (on the device in a real run).
        const auto last = last_sampled_.find(key(c.seq));
        EXPECT_TRUE(i + 1 == toks.size() && last != last_sampled_.end())
            << key(c.seq) << ": a pending token that no previous step sampled";
        if (last != last_sampled_.end()) toks[i] = last->second;
        ++stats_.pending_tokens;
      }
      uint64_t state = kStateSeed;  // has_initial = 0: the slot's old bytes are never read
      if (c.num_computed > 0 && cfg_.need_slots) {
        state = slot_state_[static_cast<size_t>(c.slot)];
        EXPECT_EQ(state, fold(rec.tokens, c.num_computed))
            << key(c.seq) << ": the slot does not hold the state of its computed tokens";
        ++stats_.state_checks;
      } else if (c.num_computed > 0) {
        state = fold(rec.tokens, c.num_computed);
      }
      for (size_t i = 0; i < toks.size(); ++i) {
        const int64_t pos = c.num_computed + static_cast<int64_t>(i);
        state = mix(state, static_cast<uint64_t>(toks[i]));
        if (cfg_.need_kv)
          kv_[static_cast<size_t>(c.blocks->slot(pos, bs))] = kv_entry(toks[i], pos);
      }
      if (cfg_.need_slots) slot_state_[static_cast<size_t>(c.slot)] = state;
      if (cfg_.need_kv) {  // attention reads the whole context through the block table
        const int64_t ctx = c.num_computed + static_cast<int64_t>(c.tokens.size());
        for (int64_t pos = 0; pos < ctx; ++pos) {
          const uint64_t got = kv_[static_cast<size_t>(c.blocks->slot(pos, bs))];
          if (got != kv_entry(rec.tokens[static_cast<size_t>(pos)], pos)) {
            ADD_FAILURE() << key(c.seq) << ": KV position " << pos << " holds another token";
            break;
          }
          ++stats_.kv_reads_checked;
        }
      }
      sampled.push_back(c.samples ? sample_token(state, c.seq.index) : -1);
      if (c.samples) {  // what the device now knows (the scheduler learns it at commit)
        rec.tokens.push_back(sampled.back());
        last_sampled_[key(c.seq)] = sampled.back();
      }
    }
    return sampled;
  }

  // The scheduler's advance(), mirrored in the record.
  void advance(const StepPlan& p) {
    sched_.advance(p);
    for (const ScheduledChunk& c : p.chunks)
      if (SeqRecord* rec = live_record(c)) rec->computed += static_cast<int64_t>(c.tokens.size());
  }

  // The scheduler's commit() plus the engine's stop checks (finish()).
  void commit(const StepPlan& p, const std::vector<int32_t>& sampled) {
    sched_.commit(p, sampled);
    for (size_t i = 0; i < p.chunks.size(); ++i) {
      const ScheduledChunk& c = p.chunks[i];
      SeqRecord* rec = c.samples ? live_record(c) : nullptr;
      if (!rec || rec->finished) continue;
      const FakeRequest& req = rec_req(c.seq).req;
      EXPECT_EQ(static_cast<int64_t>(rec->output.size()), c.num_generated) << key(c.seq);
      rec->output.push_back(sampled[i]);
      EXPECT_EQ(sampled[i], rec->tokens[req.prompt.size() + static_cast<size_t>(c.num_generated)]);
      // The scheduler's view: the committed ids, then at most one still pending.
      const std::vector<int32_t>& got = sched_.output_tokens(c.seq);
      EXPECT_TRUE(got.size() >= rec->output.size() && got.size() <= rec->output.size() + 1 &&
                  std::equal(rec->output.begin(), rec->output.end(), got.begin()))
          << key(c.seq);
      for (size_t j = rec->output.size(); j < got.size(); ++j)
        EXPECT_EQ(got[j], kPendingToken) << key(c.seq);
      const auto length = static_cast<int64_t>(req.prompt.size() + rec->output.size());
      if (stops(static_cast<int64_t>(rec->output.size()), length, sampled[i], req.max_tokens,
                cfg_.max_model_len, stop_below_)) {
        sched_.finish(c.seq);
        rec->finished = true;
        ++stats_.finished;
        ReqRecord& r = rec_req(c.seq);
        r.outputs[c.seq.index] = rec->output;
        if (--r.live == 0) r.done = true;
      }
    }
  }

  void update(const StepPlan& p, const std::vector<int32_t>& sampled) {
    advance(p);
    commit(p, sampled);
  }

  void step() {
    const StepPlan p = plan();
    update(p, run(p));
  }

  // Overlapped: the plan of step t+1 is made (and run) before step t is committed.
  void run_pipelined_to_completion(int64_t max_steps = 200000) {
    InFlight in_flight;
    for (int64_t s = 0; sched_.has_work() || in_flight.active; ++s) {
      ASSERT_LT(s, max_steps) << "the scheduler made no progress";
      pipelined_step(in_flight);
      if (::testing::Test::HasFailure()) return;
    }
  }
  // One overlapped step: plan and launch t+1, then commit t.
  void pipelined_step(InFlight& in_flight) {
    StepPlan p = plan();
    std::vector<int32_t> sampled = run(p);
    advance(p);
    if (in_flight.active) commit(in_flight.plan, in_flight.sampled);
    in_flight.active = !p.empty();
    in_flight.plan = std::move(p);
    in_flight.sampled = std::move(sampled);
  }

  // Steps until the scheduler is idle; fails (instead of hanging) after `max_steps`.
  void run_to_completion(int64_t max_steps = 200000) {
    for (int64_t s = 0; sched_.has_work(); ++s) {
      ASSERT_LT(s, max_steps) << "the scheduler made no progress";
      step();
      if (::testing::Test::HasFailure()) return;
    }
  }

  // Every block and slot back in its pool, every reference count zero, nothing live.
  void expect_all_free() {
    EXPECT_FALSE(sched_.has_work());
    EXPECT_EQ(sched_.num_live_requests(), 0);
    EXPECT_EQ(sched_.num_waiting(), 0);
    EXPECT_EQ(sched_.num_running(), 0);
    const cache::BlockAllocator& ba = sched_.block_allocator();
    EXPECT_EQ(ba.num_free(), ba.num_blocks());
    for (int32_t b = 0; b < ba.num_blocks(); ++b)
      EXPECT_EQ(ba.ref_count(b), 0) << "block " << b;
    EXPECT_EQ(sched_.num_free_slots(), sched_.slot_allocator().num_slots());
  }

  // Every completion of every request that was not aborted equals its reference; returns how
  // many were compared.
  int64_t expect_reference_outputs() {
    int64_t compared = 0;
    for (const auto& [id, r] : reqs_) {
      if (r.aborted) continue;
      EXPECT_TRUE(r.done) << id << " never finished";
      for (int32_t c = 0; c < r.req.n; ++c) {
        const auto it = r.outputs.find(c);
        if (it == r.outputs.end()) {
          ADD_FAILURE() << id << "/" << c << " has no output";
          continue;
        }
        EXPECT_EQ(it->second, reference_output(r.req, c, cfg_.max_model_len, stop_below_))
            << id << "/" << c;
        ++compared;
      }
    }
    return compared;
  }

  const std::vector<int32_t>& output(const std::string& id, int32_t index) const {
    return reqs_.at(id).outputs.at(index);
  }
  int64_t first_step(const std::string& id) const { return reqs_.at(id).first_step; }
  // Tokens of sequence "id/index" in the caches (-1: never scheduled).
  int64_t computed(const std::string& k) const {
    const auto it = seqs_.find(k);
    return it == seqs_.end() ? -1 : it->second.computed;
  }
  bool was_preempted(const std::string& k) const { return preempted_.count(k) > 0; }

 private:
  struct ReqRecord {
    FakeRequest req;
    int64_t arrival = 0, first_step = -1;
    int32_t live = 0;
    bool aborted = false, done = false;
    std::map<int32_t, std::vector<int32_t>> outputs;
  };
  struct SeqRecord {
    std::vector<int32_t> tokens;  // prompt + every id the device sampled
    std::vector<int32_t> output;  // the ids committed
    int64_t computed = 0;
    bool finished = false;
    bool readmit = false;  // preempted: its next first chunk is a re-admission
    uint64_t uid = 0;      // the scheduler's uid in its last chunk
  };

  ReqRecord& rec_req(const SeqRef& s) { return reqs_.at(s.request_id); }

  // The record of a chunk's sequence while the scheduler still runs it (null: aborted, or its
  // id reused since the plan was made).
  SeqRecord* live_record(const ScheduledChunk& c) {
    if (reqs_.at(c.seq.request_id).aborted) return nullptr;
    const auto it = seqs_.find(key(c.seq));
    return it == seqs_.end() || it->second.uid != c.uid ? nullptr : &it->second;
  }

  // The invariants every plan must hold, against the test's own record.
  void check_plan(const StepPlan& p) {
    const int64_t step = stats_.steps++;
    const int64_t bs = cfg_.block_size;
    const cache::BlockAllocator& ba = sched_.block_allocator();
    for (const SeqRef& s : p.preempted) {
      auto it = seqs_.find(key(s));
      ASSERT_NE(it, seqs_.end()) << key(s) << " preempted before it ran";
      it->second.computed = 0;  // recompute from scratch
      it->second.readmit = true;
      preempted_.insert(key(s));
    }
    int64_t tokens = 0;
    int prev_phase = 0;
    std::set<int32_t> slots_seen;
    std::map<int32_t, int64_t> block_users;  // block -> chunks in this step whose table holds it
    std::set<std::string> seen;
    for (const ScheduledChunk& c : p.chunks) {
      const std::string k = key(c.seq);
      ASSERT_TRUE(seen.insert(k).second) << k << " scheduled twice in one step";
      ReqRecord& r = rec_req(c.seq);
      ASSERT_FALSE(r.aborted) << k << " scheduled after its abort";
      if (r.first_step < 0) {
        r.first_step = step;
        // FIFO: every live request that arrived earlier has been scheduled already.
        for (const auto& [id, other] : reqs_) {
          if (other.arrival < r.arrival && !other.aborted && !other.done) {
            EXPECT_GE(other.first_step, 0) << k << " overtook " << id;
          }
        }
      }
      auto it = seqs_.find(k);
      if (it == seqs_.end()) {
        SeqRecord fresh;
        fresh.tokens = r.req.prompt;
        const int64_t L = static_cast<int64_t>(r.req.prompt.size());
        if (c.seq.index > 0 && r.req.n > 1 && L > 1) {  // a fork's child: the parent computed L-1
          EXPECT_EQ(c.num_computed, L - 1) << k;
          fresh.computed = L - 1;
          ++stats_.forks;
        }
        it = seqs_.emplace(k, std::move(fresh)).first;
      }
      SeqRecord& s = it->second;
      ASSERT_FALSE(s.finished) << k << " scheduled after finish";
      s.uid = c.uid;
      const int64_t len = static_cast<int64_t>(c.tokens.size());
      const int64_t known = static_cast<int64_t>(s.tokens.size());
      ASSERT_GE(len, 1) << k;
      ASSERT_EQ(c.num_computed, s.computed) << k;
      ASSERT_LE(c.num_computed + len, known) << k << " runs tokens that do not exist";
      const auto committed = static_cast<int64_t>(r.req.prompt.size() + s.output.size());
      for (int64_t i = 0; i < len; ++i) {
        const int64_t pos = c.num_computed + i;
        if (c.tokens[static_cast<size_t>(i)] == kPendingToken) {  // sampled, not yet committed
          ASSERT_TRUE(pos == known - 1 && pos >= committed) << k << " token " << pos;
        } else {
          ASSERT_EQ(c.tokens[static_cast<size_t>(i)], s.tokens[static_cast<size_t>(pos)])
              << k << " token " << pos;
        }
      }
      EXPECT_EQ(c.samples, c.num_computed + len == known) << k;
      EXPECT_EQ(c.num_generated, known - static_cast<int64_t>(r.req.prompt.size())) << k;
      EXPECT_LE(c.num_computed + len + (c.samples ? 1 : 0), cfg_.max_model_len) << k;
      // Decode rows first, then continuing prefill chunks, then first chunks.
      const bool decode = c.num_computed > 0 && len == 1 && c.samples;
      const int phase = decode ? 0 : c.num_computed > 0 ? 1 : 2;
      EXPECT_GE(phase, prev_phase) << k << " out of order";
      prev_phase = phase;
      stats_.decode_rows += phase == 0;
      stats_.continued_prefills += phase == 1;
      stats_.first_chunks += phase == 2;
      if (phase == 2 && s.readmit) ++stats_.readmissions;
      s.readmit = false;
      tokens += len;
      if (cfg_.need_slots) {
        EXPECT_TRUE(c.slot >= 0 && c.slot < cfg_.num_slots) << k << " slot " << c.slot;
        EXPECT_TRUE(sched_.slot_allocator().in_use(c.slot)) << k << " slot " << c.slot;
        EXPECT_TRUE(slots_seen.insert(c.slot).second) << "slot " << c.slot << " used twice";
      }
      if (cfg_.need_kv) {
        ASSERT_NE(c.blocks, nullptr);
        const auto& b = c.blocks->blocks();
        const int64_t ctx = c.num_computed + len;
        ASSERT_EQ(static_cast<int64_t>(b.size()), (ctx + bs - 1) / bs)
            << k << ": the table must cover exactly the step's context";
        const int64_t shared_len = static_cast<int64_t>(r.req.prompt.size()) - 1;
        for (size_t j = 0; j < b.size(); ++j) {
          EXPECT_GE(ba.ref_count(b[j]), 1) << k << " block " << b[j] << " is free";
          ++block_users[b[j]];
          if (ba.ref_count(b[j]) > 1) {  // only full blocks of the prompt part its fork shared
            ++stats_.shared_block_refs;
            EXPECT_LE(static_cast<int64_t>(j + 1) * bs, shared_len)
                << k << " shares block " << b[j] << " beyond its prompt";
          }
        }
        // Blocks this chunk writes are its own: shared blocks are read-only prompt blocks.
        for (int64_t j = c.num_computed / bs; j < static_cast<int64_t>(b.size()); ++j)
          EXPECT_EQ(ba.ref_count(b[static_cast<size_t>(j)]), 1)
              << k << " writes block " << b[static_cast<size_t>(j)] << " that others read";
      }
    }
    for (auto [block, users] : block_users)
      EXPECT_GE(ba.ref_count(block), users) << "block " << block;
    EXPECT_EQ(p.num_tokens, tokens);
    EXPECT_LE(tokens, cfg_.max_num_batched_tokens);
    EXPECT_LE(static_cast<int64_t>(p.chunks.size()), cfg_.max_num_seqs);
    EXPECT_LE(sched_.num_running(), cfg_.max_num_seqs);
    // Copies go into the slots / blocks of children forked in this very plan.
    for (auto [from, to] : p.slot_copies) {
      EXPECT_TRUE(slots_seen.count(from) && slots_seen.count(to)) << from << " -> " << to;
      EXPECT_NE(from, to);
    }
    stats_.block_copies += static_cast<int64_t>(p.block_copies.size());
    for (auto [from, to] : p.block_copies) {
      EXPECT_NE(from, to);
      EXPECT_EQ(ba.ref_count(to), 1) << "a copy must land in a private block";
    }
    stats_.chunks += static_cast<int64_t>(p.chunks.size());
    stats_.max_chunks_in_step =
        std::max(stats_.max_chunks_in_step, static_cast<int64_t>(p.chunks.size()));
  }

  SchedulerConfig cfg_;
  Scheduler sched_;
  int32_t stop_below_ = 0;
  std::vector<uint64_t> kv_;          // [num_blocks * block_size] KV "contents"
  std::vector<uint64_t> slot_state_;  // [num_slots] Mamba "state"
  std::map<std::string, ReqRecord> reqs_;
  std::map<std::string, SeqRecord> seqs_;
  std::set<std::string> preempted_;              // sequences preempted at least once
  std::map<std::string, int32_t> last_sampled_;  // the fake device's last id per sequence
  int64_t next_arrival_ = 0;
  RunStats stats_;
};

}  // namespace strata::engine::testing
