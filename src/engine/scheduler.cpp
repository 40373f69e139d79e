#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace strata::engine {

namespace {

struct Request;

// One completion of a request: its tokens, its place in the caches, its queue state.
struct Sequence {
  enum class State { Waiting, Running, Finished };

  SeqRef ref;
  Request* req = nullptr;
  uint64_t uid = 0;  // unique per sequence: plans made before an abort and a reused id are stale
  State state = State::Waiting;
  std::vector<int32_t> output;  // generated ids
  int64_t num_computed = 0;     // tokens in the caches
  int32_t slot = -1;
  cache::BlockTable blocks;
  bool pre_fork = false;   // completion 0 of an n > 1 request whose children don't exist yet
  bool failed = false;     // sampled no valid id (non-finite logits): never runs again
  bool scheduled = false;  // has a chunk in the plan being built

  int64_t length() const;  // prompt + output
  int32_t token(int64_t i) const;
  // Tokens the prefill phase computes: all of them, or all but the last prompt token for a
  // parent that has yet to fork (the fork step runs that token once per completion).
  int64_t prefill_target() const { return pre_fork ? length() - 1 : length(); }
  // Every known token but the last is in the caches: the next chunk is one decode row.
  bool is_decode() const { return num_computed > 0 && length() - num_computed == 1; }
  int64_t seats() const;
};

struct Request {
  std::string id;
  std::vector<int32_t> prompt;
  int32_t n = 1;
  int64_t max_tokens = 0;
  std::vector<std::unique_ptr<Sequence>> seqs;  // [n]; children are null until the fork
  int32_t live = 0;                             // completions not finished (unborn included)
};

int64_t Sequence::length() const {
  return static_cast<int64_t>(req->prompt.size() + output.size());
}

int32_t Sequence::token(int64_t i) const {
  const auto p = static_cast<int64_t>(req->prompt.size());
  return i < p ? req->prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - p)];
}

int64_t Sequence::seats() const {
  return pre_fork ? req->n : 1;
}

}  // namespace

struct Scheduler::Impl {
  explicit Impl(const SchedulerConfig& c)
      : cfg(c),
        blocks(c.need_kv ? c.num_blocks : 0, c.block_size),
        slots(c.need_slots ? c.num_slots : 0) {}

  SchedulerConfig cfg;
  cache::BlockAllocator blocks;
  cache::SlotAllocator slots;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests;
  std::deque<Sequence*> waiting;   // front first; preempted sequences are put back in front
  std::vector<Sequence*> running;  // admission order: the back is preempted first
  int64_t seats_used = 0;          // sum of running sequences' seats() <= max_num_seqs
  int64_t preemptions = 0;
  uint64_t next_uid = 1;

  // A sequence that may run: the token it samples stays within max_model_len and max_tokens.
  bool schedulable(const Sequence& s) const {
    return !s.failed && s.length() < cfg.max_model_len &&
           static_cast<int64_t>(s.output.size()) < s.req->max_tokens;
  }

  Sequence* find(const SeqRef& ref) const {
    const auto it = requests.find(ref.request_id);
    if (it == requests.end() || ref.index < 0 || ref.index >= it->second->n) return nullptr;
    return it->second->seqs[static_cast<size_t>(ref.index)].get();
  }

  void free_cache(Sequence& s) {
    s.blocks.release(blocks);
    if (s.slot >= 0) slots.release(s.slot);
    s.slot = -1;
    s.num_computed = 0;
  }

  // Takes a sequence out of the queue it is in and frees everything it holds.
  void detach(Sequence& s) {
    if (s.state == Sequence::State::Running) {
      running.erase(std::find(running.begin(), running.end(), &s));
      seats_used -= s.seats();
    } else if (s.state == Sequence::State::Waiting) {
      waiting.erase(std::find(waiting.begin(), waiting.end(), &s));
    }
    free_cache(s);
  }

  // Preemption by recompute: the sequence goes back to the front of the queue holding nothing;
  // its output stays and will be recomputed with the prompt.
  void preempt(Sequence& s, StepPlan& plan) {
    detach(s);
    s.state = Sequence::State::Waiting;
    waiting.push_front(&s);
    plan.preempted.push_back(s.ref);
    ++preemptions;
  }

  // The newest running sequence after `self` that has no chunk in this plan, else `self`:
  // an older sequence is never preempted for a newer one.
  Sequence* victim(Sequence* self) const {
    for (auto it = running.rbegin(); it != running.rend() && *it != self; ++it)
      if (!(*it)->scheduled) return *it;
    return self;
  }

  // Runs `acquire` until it succeeds, preempting newer sequences in between; false when `s`
  // itself had to be preempted.
  template <class Acquire>
  bool acquire_or_preempt(Sequence* s, StepPlan& plan, Acquire acquire) {
    while (!acquire()) {
      Sequence* v = victim(s);
      preempt(*v, plan);
      if (v == s) return false;
    }
    return true;
  }

  void add_chunk(Sequence& s, int64_t num_tokens, StepPlan& plan) {
    ScheduledChunk c;
    c.seq = s.ref;
    c.slot = s.slot;
    c.num_computed = s.num_computed;
    c.tokens.reserve(static_cast<size_t>(num_tokens));
    for (int64_t i = 0; i < num_tokens; ++i)
      c.tokens.push_back(s.token(s.num_computed + i));
    // Only a decode row may carry a token still on the device (one step in flight at most).
    for (int64_t i = 0; i + 1 < num_tokens; ++i)
      STRATA_CHECK(c.tokens[static_cast<size_t>(i)] != kPendingToken,
                   "{}/{}: a chunk with a pending token inside (two steps in flight?)",
                   s.ref.request_id, s.ref.index);
    c.blocks = &s.blocks;
    c.samples = s.num_computed + num_tokens == s.length();
    c.num_generated = static_cast<int64_t>(s.output.size());
    c.uid = s.uid;
    plan.num_tokens += num_tokens;
    plan.chunks.push_back(std::move(c));
    s.scheduled = true;
  }

  // The fork of an n > 1 request (scheduler.h): all-or-nothing, false when the pools lack the
  // children's slots or blocks.
  bool try_fork(Sequence& parent, size_t parent_pos, StepPlan& plan) {
    Request& r = *parent.req;
    const int64_t shared_len = parent.num_computed;  // L - 1 prompt tokens
    const int64_t children = r.n - 1;
    if (cfg.need_slots && slots.num_free() < children) return false;
    if (cfg.need_kv) {
      // Each child: one private block (the copy of a partial last block, or the block that
      // position L-1 starts); the parent may need one for position L-1 as well.
      const int64_t need = children + parent.blocks.blocks_missing(blocks, parent.length());
      if (blocks.num_free() < need) return false;
      STRATA_CHECK(parent.blocks.ensure(blocks, parent.length()));
    }
    parent.pre_fork = false;  // its seats pass to the children: seats_used is unchanged
    add_chunk(parent, 1, plan);
    const int64_t full_blocks = shared_len / cfg.block_size;
    const bool partial = shared_len % cfg.block_size != 0;
    for (int32_t c = 1; c < r.n; ++c) {
      auto child = std::make_unique<Sequence>();
      child->ref = SeqRef{r.id, c};
      child->req = &r;
      child->uid = next_uid++;
      child->state = Sequence::State::Running;
      child->num_computed = shared_len;
      if (cfg.need_slots) {
        child->slot = *slots.allocate();
        plan.slot_copies.emplace_back(parent.slot, child->slot);
      }
      if (cfg.need_kv) {
        child->blocks.share_prefix(parent.blocks, full_blocks, blocks);
        STRATA_CHECK(child->blocks.ensure(blocks, child->length()));
        if (partial)
          plan.block_copies.emplace_back(parent.blocks.blocks()[static_cast<size_t>(full_blocks)],
                                         child->blocks.blocks()[static_cast<size_t>(full_blocks)]);
      }
      // Admitted with the parent: preempted after anything admitted later.
      running.insert(running.begin() + static_cast<std::ptrdiff_t>(parent_pos) + c, child.get());
      add_chunk(*child, 1, plan);
      r.seqs[static_cast<size_t>(c)] = std::move(child);
    }
    return true;
  }

  // Pass 1: one token for every running sequence that decodes (a parent's fork included).
  void schedule_decodes(StepPlan& plan, int64_t& budget) {
    for (size_t i = 0; i < running.size();) {
      Sequence* s = running[i];
      if (s->scheduled || !s->is_decode() || !schedulable(*s)) {
        ++i;
        continue;
      }
      const int64_t tokens = s->pre_fork ? s->req->n : 1;
      if (tokens > budget) {  // only when max_num_batched_tokens < max_num_seqs: refused
        ++i;
        continue;
      }
      bool ok;
      if (s->pre_fork) {
        ok = acquire_or_preempt(s, plan, [&] { return try_fork(*s, i, plan); });
      } else {
        ok = acquire_or_preempt(
            s, plan, [&] { return !cfg.need_kv || s->blocks.ensure(blocks, s->length()); });
        if (ok) add_chunk(*s, 1, plan);
      }
      if (!ok) continue;  // s left running: running[i] is the next one
      budget -= tokens;
      ++i;
    }
  }

  // Pass 2: the next chunk of every running sequence still prefilling, oldest first.
  void schedule_prefill_chunks(StepPlan& plan, int64_t& budget) {
    for (size_t i = 0; i < running.size() && budget > 0;) {
      Sequence* s = running[i];
      const int64_t remaining = s->prefill_target() - s->num_computed;
      if (s->scheduled || s->is_decode() || remaining <= 0 || !schedulable(*s)) {
        ++i;
        continue;
      }
      const int64_t n = std::min(remaining, budget);
      const bool ok = acquire_or_preempt(
          s, plan, [&] { return !cfg.need_kv || s->blocks.ensure(blocks, s->num_computed + n); });
      if (!ok) continue;
      add_chunk(*s, n, plan);
      budget -= n;
      ++i;
    }
  }

  // Pass 3: admissions from the front of the queue, in order, while the first one fits (a
  // later request never overtakes an earlier one). New sequences never preempt.
  // Prefix caching (a later issue) hooks in here: look up the prompt's full blocks by content
  // hash (cache::BlockAllocator), share() the hits, restore the Mamba state snapshot of the
  // last hit block boundary into the new slot (a slot copy), and start at num_computed = the
  // hit length instead of 0.
  void schedule_admissions(StepPlan& plan, int64_t& budget) {
    if (!plan.preempted.empty()) return;  // the pools are short: admitting would thrash
    for (size_t q = 0; q < waiting.size() && budget > 0;) {
      Sequence* s = waiting[q];
      if (!schedulable(*s)) {  // waits for the engine's finish() (it never runs again)
        ++q;
        continue;
      }
      if (seats_used + s->seats() > cfg.max_num_seqs) return;
      const int64_t n = std::min(s->prefill_target(), budget);
      if (cfg.need_slots && slots.num_free() == 0) return;
      if (cfg.need_kv && s->blocks.blocks_missing(blocks, n) > blocks.num_free()) return;
      if (cfg.need_slots) s->slot = *slots.allocate();
      if (cfg.need_kv) STRATA_CHECK(s->blocks.ensure(blocks, n));
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(q));
      s->state = Sequence::State::Running;
      running.push_back(s);
      seats_used += s->seats();
      add_chunk(*s, n, plan);
      budget -= n;
    }
  }

  Sequence* make_sequence(Request& r, int32_t index) {
    auto s = std::make_unique<Sequence>();
    s->ref = SeqRef{r.id, index};
    s->req = &r;
    s->uid = next_uid++;
    Sequence* p = s.get();
    r.seqs[static_cast<size_t>(index)] = std::move(s);
    return p;
  }
};

Scheduler::Scheduler(const SchedulerConfig& c) : config_(c) {
  if (c.max_num_seqs < 1) fail("scheduler: max_num_seqs must be positive, got {}", c.max_num_seqs);
  if (c.max_num_batched_tokens < c.max_num_seqs)
    fail("scheduler: max_num_batched_tokens ({}) must be at least max_num_seqs ({})",
         c.max_num_batched_tokens, c.max_num_seqs);
  if (c.max_model_len < 2)
    fail("scheduler: max_model_len must be at least 2, got {}", c.max_model_len);
  if (c.need_kv && c.num_blocks < 1) fail("scheduler: the model needs KV blocks but has none");
  if (c.need_slots && c.num_slots < 1) fail("scheduler: the model needs Mamba slots but has none");
  impl_ = std::make_unique<Impl>(c);
}

Scheduler::~Scheduler() = default;

bool Scheduler::add(const EngineRequest& request) {
  Impl& m = *impl_;
  const auto L = static_cast<int64_t>(request.prompt.size());
  const int32_t n = request.params.n;
  const int64_t max_tokens = request.params.max_tokens;
  if (L < 1) fail("request {}: empty prompt", request.id);
  if (max_tokens < 1)
    fail("request {}: max_tokens must be at least 1, got {}", request.id, max_tokens);
  if (L + max_tokens > config_.max_model_len)
    fail("request {}: {} prompt tokens + max_tokens {} exceed the maximum model length {}",
         request.id, L, max_tokens, config_.max_model_len);
  if (n < 1 || n > config_.max_num_seqs)
    fail("request {}: n = {} outside [1, max_num_seqs = {}]", request.id, n, config_.max_num_seqs);
  if (config_.need_slots && n > config_.num_slots)
    fail("request {}: n = {} completions need more Mamba slots than the pool has ({})", request.id,
         n, config_.num_slots);
  if (config_.need_kv) {
    // Alone in the pool the request must fit: its longest sequence, and its fork (scheduler.h).
    int64_t need = m.blocks.blocks_for(L + max_tokens - 1);
    if (n > 1 && L > 1) need = std::max(need, m.blocks.blocks_for(L) + n - 1);
    if (need > config_.num_blocks)
      fail("request {}: needs {} KV blocks, more than the pool has ({})", request.id, need,
           config_.num_blocks);
  }
  if (m.requests.count(request.id)) fail("request {}: the id is already in use", request.id);
  if (config_.max_waiting > 0 && static_cast<int64_t>(m.waiting.size()) >= config_.max_waiting)
    return false;

  auto r = std::make_unique<Request>();
  r->id = request.id;
  r->prompt = request.prompt;
  r->n = n;
  r->max_tokens = max_tokens;
  r->seqs.resize(static_cast<size_t>(n));
  r->live = n;
  if (n > 1 && L > 1) {
    Sequence* parent = m.make_sequence(*r, 0);
    parent->pre_fork = true;
    m.waiting.push_back(parent);
  } else {  // one completion, or a one-token prompt: nothing to share
    for (int32_t c = 0; c < n; ++c)
      m.waiting.push_back(m.make_sequence(*r, c));
  }
  m.requests.emplace(request.id, std::move(r));
  return true;
}

bool Scheduler::abort(const std::string& request_id) {
  Impl& m = *impl_;
  const auto it = m.requests.find(request_id);
  if (it == m.requests.end()) return false;
  for (auto& s : it->second->seqs)
    if (s && s->state != Sequence::State::Finished) m.detach(*s);
  m.requests.erase(it);
  return true;
}

StepPlan Scheduler::schedule() {
  Impl& m = *impl_;
  StepPlan plan;
  int64_t budget = config_.max_num_batched_tokens;
  m.schedule_decodes(plan, budget);
  m.schedule_prefill_chunks(plan, budget);
  m.schedule_admissions(plan, budget);
  for (const ScheduledChunk& c : plan.chunks)
    m.find(c.seq)->scheduled = false;
  return plan;
}

void Scheduler::update(const StepPlan& plan, const std::vector<int32_t>& sampled) {
  advance(plan);
  commit(plan, sampled);
}

void Scheduler::advance(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* s = impl_->find(c.seq);
    if (!s || s->uid != c.uid || s->state != Sequence::State::Running) continue;  // gone since
    STRATA_CHECK(
        s->num_computed == c.num_computed,
        "advance: sequence {}/{} has {} tokens computed, the plan says {} (advanced twice?)",
        c.seq.request_id, c.seq.index, s->num_computed, c.num_computed);
    s->num_computed += static_cast<int64_t>(c.tokens.size());
    if (c.samples) s->output.push_back(kPendingToken);
  }
}

void Scheduler::commit(const StepPlan& plan, const std::vector<int32_t>& sampled) {
  STRATA_CHECK_EQ(sampled.size(), plan.chunks.size());
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.samples) continue;
    Sequence* s = impl_->find(c.seq);
    // Gone since, or finished; a sequence preempted since keeps its token.
    if (!s || s->uid != c.uid || s->state == Sequence::State::Finished || s->failed) continue;
    const auto at = static_cast<size_t>(c.num_generated);
    STRATA_CHECK(at < s->output.size() && s->output[at] == kPendingToken,
                 "commit: sequence {}/{} has no pending token {} (committed twice?)",
                 c.seq.request_id, c.seq.index, at);
    if (sampled[i] >= 0) {
      s->output[at] = sampled[i];
    } else {  // no valid id: the sequence stops here (the engine finishes it with an error)
      s->output.resize(at);
      s->failed = true;
    }
  }
}

void Scheduler::finish(const SeqRef& ref) {
  Impl& m = *impl_;
  Sequence* s = m.find(ref);
  if (!s || s->state == Sequence::State::Finished) return;
  Request* r = s->req;
  if (s->pre_fork) {  // the children were never born: the whole request ends
    abort(r->id);
    return;
  }
  m.detach(*s);
  s->state = Sequence::State::Finished;
  if (--r->live == 0) m.requests.erase(r->id);
}

const std::vector<int32_t>& Scheduler::output_tokens(const SeqRef& ref) const {
  const Sequence* s = impl_->find(ref);
  if (!s) fail("scheduler: no sequence {}/{}", ref.request_id, ref.index);
  return s->output;
}

int64_t Scheduler::num_live_requests() const {
  return static_cast<int64_t>(impl_->requests.size());
}
int64_t Scheduler::num_waiting() const {
  return static_cast<int64_t>(impl_->waiting.size());
}
int64_t Scheduler::num_running() const {
  return static_cast<int64_t>(impl_->running.size());
}
int64_t Scheduler::num_free_blocks() const {
  return impl_->blocks.num_free();
}
int64_t Scheduler::num_free_slots() const {
  return impl_->slots.num_free();
}
int64_t Scheduler::num_preemptions() const {
  return impl_->preemptions;
}
bool Scheduler::has_work() const {
  return !impl_->waiting.empty() || !impl_->running.empty();
}
const cache::BlockAllocator& Scheduler::block_allocator() const {
  return impl_->blocks;
}
const cache::SlotAllocator& Scheduler::slot_allocator() const {
  return impl_->slots;
}

}  // namespace strata::engine
