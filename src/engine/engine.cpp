#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>
#include <map>
#include <random>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "engine/token_ids.h"
#include "text/grammar_mask.h"
#include "text/token_bytes.h"

namespace strata::engine {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SchedulerConfig scheduler_config(const Executor& ex, const EngineConfig& c) {
  SchedulerConfig s;
  s.max_num_seqs = ex.config().max_num_seqs;
  s.max_num_batched_tokens = c.max_num_batched_tokens;
  s.max_model_len = ex.max_model_len();
  s.block_size = ex.plan().block_size;
  s.num_blocks = ex.plan().num_blocks;
  s.num_slots = ex.request_slots();
  s.need_kv = ex.model_config().num_attention > 0;
  s.need_slots = ex.model_config().num_mamba > 0;
  s.max_waiting = c.max_waiting;
  return s;
}

ExecutorConfig executor_config(const EngineConfig& c) {
  ExecutorConfig e = c.executor;
  e.max_num_batched_tokens = c.max_num_batched_tokens;
  return e;
}

}  // namespace

struct LLMEngine::Impl {
  struct Live {
    EngineRequest request;
    uint64_t seed = 0;
    std::vector<bool> done;  // [n] each completion finished
    bool all_done() const { return std::find(done.begin(), done.end(), false) == done.end(); }
    bool scheduled = false;
    double queue_seconds = 0, first_token_seconds = -1;
    std::vector<text::JsonGrammarState> grammar;  // [n] guided decoding: each completion's state
  };
  model::NemotronHModel& model;
  const text::Tokenizer* tokenizer;
  EngineConfig config;
  OutputProcessor output;
  std::map<std::string, Live> live;
  std::vector<RequestOutput> pending;  // outputs made outside step() (aborts)
  std::deque<StepPlan> in_flight;      // launched, not yet collected (at most two)
  std::mt19937_64 seeds{std::random_device{}()};
  EngineStats stats;
  // Guided decoding: the vocabulary's bytes and their trie, built at the first guided request.
  std::vector<std::optional<std::string>> vocab_bytes;
  std::unique_ptr<text::TokenTrie> trie;

  Impl(model::NemotronHModel& m, const text::Tokenizer* tok, const EngineConfig& c)
      : model(m), tokenizer(tok), config(c), output(tok, c.eos_ids) {}
};

LLMEngine::LLMEngine(model::NemotronHModel& model, const text::Tokenizer* tokenizer,
                     const EngineConfig& config)
    : impl_(std::make_unique<Impl>(model, tokenizer, config)),
      executor_(std::make_unique<Executor>(model, executor_config(config))),
      scheduler_(std::make_unique<Scheduler>(scheduler_config(*executor_, config))) {
  if (config.max_num_batched_tokens < 1)
    fail("--max-num-batched-tokens must be >= 1, got {}", config.max_num_batched_tokens);
}

LLMEngine::~LLMEngine() = default;

void LLMEngine::validate(const EngineRequest& r) const {
  const model::ModelConfig& c = impl_->model.config();
  if (r.prompt.empty()) fail("the prompt is empty");
  validate_token_ids(r.prompt, c.vocab_size, "prompt");
  r.params.validate(c.vocab_size);
  const int64_t max_len = executor_->max_model_len();
  const auto prompt_len = static_cast<int64_t>(r.prompt.size());
  if (prompt_len + r.params.max_tokens > max_len)
    fail(
        "this model's maximum context length is {} tokens; the request has {} prompt tokens and "
        "max_tokens {} ({} in all)",
        max_len, prompt_len, r.params.max_tokens, prompt_len + r.params.max_tokens);
  if (r.params.guided_json) {
    if (!impl_->tokenizer)
      fail("guided decoding needs a tokenizer (the model is served without one)");
    if (impl_->config.eos_ids.empty()) fail("guided decoding needs the model's EOS id");
  }
  if (r.params.n > executor_->request_slots())
    fail("n = {} exceeds the sequences the engine can run at once ({})", r.params.n,
         executor_->request_slots());
}

int64_t LLMEngine::max_model_len() const { return executor_->max_model_len(); }
int64_t LLMEngine::max_waiting() const { return impl_->config.max_waiting; }

bool LLMEngine::add_request(EngineRequest request) {
  validate(request);
  Impl& I = *impl_;
  if (I.live.count(request.id)) fail("request id {:?} is already in use", request.id);
  if (!scheduler_->add(request)) return false;
  I.output.add(request);
  Impl::Live l;
  l.seed = request.params.seed ? *request.params.seed : I.seeds();
  l.done.assign(static_cast<size_t>(request.params.n), false);
  if (request.params.guided_json) {
    if (!I.trie) {
      I.vocab_bytes = text::vocabulary_bytes(*I.tokenizer);
      I.trie = std::make_unique<text::TokenTrie>(I.vocab_bytes);
    }
    l.grammar.assign(static_cast<size_t>(request.params.n),
                     text::JsonGrammarState(*request.params.guided_json));
  }
  l.request = std::move(request);
  const std::string id = l.request.id;
  I.live.emplace(id, std::move(l));
  return true;
}

void LLMEngine::abort_request(const std::string& request_id) {
  Impl& I = *impl_;
  auto it = I.live.find(request_id);
  if (it == I.live.end()) return;
  scheduler_->abort(request_id);
  RequestOutput out;
  out.request_id = request_id;
  out.prompt_tokens = static_cast<int64_t>(it->second.request.prompt.size());
  for (int32_t i = 0; i < it->second.request.params.n; ++i) {
    if (it->second.done[static_cast<size_t>(i)]) continue;
    CompletionDelta d;
    d.index = i;
    I.output.finish(request_id, i, FinishReason::Abort, &d);
    d.finish = FinishReason::Abort;
    out.completions.push_back(std::move(d));
  }
  out.finished = true;
  I.output.remove(request_id);
  I.live.erase(it);
  I.pending.push_back(std::move(out));
}

bool LLMEngine::has_unfinished() const {
  return !impl_->live.empty() || !impl_->pending.empty() || !impl_->in_flight.empty();
}

void LLMEngine::launch(const StepPlan& plan) {
  Impl& I = *impl_;
  executor_->copy_slots(plan.slot_copies);
  executor_->copy_blocks(plan.block_copies);
  // Rows of the previous launched step, by sequence: a pending token is taken from there.
  std::unordered_map<uint64_t, int32_t> prev_rows;
  if (!I.in_flight.empty()) {
    const StepPlan& prev = I.in_flight.back();
    for (size_t i = 0; i < prev.chunks.size(); ++i)
      prev_rows[prev.chunks[i].uid] = static_cast<int32_t>(i);
  }
  std::vector<SequenceChunk> chunks;
  SamplingBatch batch;
  chunks.reserve(plan.chunks.size());
  batch.rows.reserve(plan.chunks.size());
  for (const ScheduledChunk& sc : plan.chunks) {
    SequenceChunk q;
    q.slot = sc.slot;
    q.num_computed = sc.num_computed;
    q.tokens = sc.tokens;
    q.blocks = sc.blocks;
    if (sc.tokens.size() == 1 && sc.tokens[0] == kPendingToken) {
      const auto it = prev_rows.find(sc.uid);
      if (it == prev_rows.end()) fail("engine: a pending token of a sequence the last step did not run");
      q.pending_row = it->second;
    }
    chunks.push_back(std::move(q));
    const Impl::Live* l = nullptr;
    if (auto it = I.live.find(sc.seq.request_id); it != I.live.end()) l = &it->second;
    ops::SamplingRow row;  // greedy for rows that sample nothing (a prefill chunk mid-prompt)
    std::vector<std::pair<int32_t, float>> bias;
    std::vector<SamplingBatch::PenaltyToken> penalized;
    if (sc.samples && l) {
      const SamplingParams& p = l->request.params;
      // Each completion draws from its own stream: children differ from the parent.
      row = p.row(l->seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(sc.seq.index),
                  static_cast<uint64_t>(sc.num_generated));
      bias = p.logit_bias;
      // min_tokens: the stop ids and EOS may not be drawn before that many tokens exist.
      if (sc.num_generated < p.min_tokens) {
        for (int32_t id : p.stop_token_ids) bias.emplace_back(id, -INFINITY);
        if (!p.ignore_eos)
          for (int32_t id : I.config.eos_ids) bias.emplace_back(id, -INFINITY);
      }
      if (p.penalized()) {
        // Every token of the sequence is on the host: penalised rows are never planned ahead
        // of their previous token (step() does not overlap while one runs).
        std::map<int32_t, SamplingBatch::PenaltyToken> seen;
        for (int32_t id : l->request.prompt) seen[id].in_prompt = true;
        for (int32_t id : scheduler_->output_tokens(sc.seq))
          if (id >= 0) ++seen[id].output_count;
        for (auto& [id, t] : seen) {
          t.id = id;
          penalized.push_back(t);
        }
      }
    }
    batch.rows.push_back(row);
    batch.logit_bias.push_back(std::move(bias));
    batch.penalty_tokens.push_back(std::move(penalized));
    std::vector<uint32_t> mask;
    if (sc.samples && l && !l->grammar.empty()) {
      // The state has this sequence's every token: guided rows are never planned ahead.
      const int64_t V = I.model.config().vocab_size;
      mask.resize(static_cast<size_t>((V + 31) / 32));
      I.trie->mask(l->grammar[static_cast<size_t>(sc.seq.index)], I.config.eos_ids, V,
                   mask.data());
    }
    batch.token_mask.push_back(std::move(mask));
  }
  executor_->launch(chunks, batch);
  scheduler_->advance(plan);
  I.in_flight.push_back(plan);
  ++I.stats.steps;
}

std::vector<RequestOutput> LLMEngine::step() {
  Impl& I = *impl_;
  std::vector<RequestOutput> outputs = std::move(I.pending);
  I.pending.clear();
  if (I.in_flight.empty()) {
    const StepPlan plan = scheduler_->schedule();
    if (plan.empty()) return outputs;
    launch(plan);
  }
  // Plan and launch the next step while the device runs the one in flight (its tokens reach
  // the next step on the device). Penalties and guided decoding's mask need each sequence's
  // tokens on the host, so with such a request live the engine runs one step at a time.
  const bool penalties = std::any_of(I.live.begin(), I.live.end(), [](const auto& kv) {
    return kv.second.request.params.needs_host_tokens();
  });
  if (I.in_flight.size() == 1 && !penalties) {
    const StepPlan next = scheduler_->schedule();
    if (!next.empty()) launch(next);
  }
  const StepPlan plan = std::move(I.in_flight.front());
  I.in_flight.pop_front();
  const SampledStep sampled = executor_->collect();
  std::vector<int32_t> ids = sampled.ids;
  for (size_t i = 0; i < ids.size(); ++i)
    if (i < sampled.nonfinite.size() && sampled.nonfinite[i]) ids[i] = -1;
  scheduler_->commit(plan, ids);
  I.stats.preemptions = scheduler_->num_preemptions();

  // Per request: the deltas of its completions that sampled in this step.
  std::map<std::string, RequestOutput> by_request;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& sc = plan.chunks[i];
    auto it = I.live.find(sc.seq.request_id);
    if (it == I.live.end()) continue;
    Impl::Live& l = it->second;
    if (!l.scheduled) {
      l.scheduled = true;
      l.queue_seconds = since(l.request.arrival);
    }
    if (!sc.samples || l.done[static_cast<size_t>(sc.seq.index)]) continue;
    RequestOutput& out = by_request[sc.seq.request_id];
    out.request_id = sc.seq.request_id;
    out.prompt_tokens = static_cast<int64_t>(l.request.prompt.size());
    CompletionDelta d;
    d.index = sc.seq.index;
    const int32_t id = ids[i];
    FinishReason reason = FinishReason::None;
    if (id < 0) {
      reason = FinishReason::Error;
      out.error = fmt::format("the model produced non-finite logits at position {}",
                              sc.num_computed + static_cast<int64_t>(sc.tokens.size()) - 1);
      I.output.finish(sc.seq.request_id, sc.seq.index, reason, &d);
    } else {
      ++I.stats.generation_tokens;
      TokenLogprobs lp;
      const TokenLogprobs* lpp = nullptr;
      if (l.request.params.logprobs >= 0 && i < sampled.logprobs.size()) {
        lp.token = id;
        lp.logprob = sampled.logprobs[i];
        lp.rank = sampled.ranks[i];
        lp.top = sampled.top_logprobs[i];
        if (static_cast<int32_t>(lp.top.size()) > l.request.params.logprobs)
          lp.top.resize(static_cast<size_t>(l.request.params.logprobs));
        lpp = &lp;
      }
      reason = I.output.on_token(sc.seq.request_id, sc.seq.index, id, lpp, &d);
      if (!l.grammar.empty() && reason == FinishReason::None) {
        // The mask admits only tokens the state accepts; a refusal here is a bug, not input.
        const auto ui = static_cast<size_t>(id);
        text::JsonGrammarState& g = l.grammar[static_cast<size_t>(sc.seq.index)];
        if (ui >= I.vocab_bytes.size() || !I.vocab_bytes[ui] || !g.advance(*I.vocab_bytes[ui])) {
          reason = FinishReason::Error;
          out.error = fmt::format("guided decoding: token {} is outside the grammar", id);
          I.output.finish(sc.seq.request_id, sc.seq.index, reason, &d);
        }
      }
      if (l.first_token_seconds < 0) {
        l.first_token_seconds = since(l.request.arrival);
        I.stats.prompt_tokens += static_cast<int64_t>(l.request.prompt.size());
      }
    }
    d.finish = reason;
    d.num_generated = sc.num_generated + 1;
    if (reason != FinishReason::None) {
      scheduler_->finish(sc.seq);  // a row it has in the step in flight is dropped at commit
      l.done[static_cast<size_t>(sc.seq.index)] = true;
    }
    out.queue_seconds = l.queue_seconds;
    out.first_token_seconds = l.first_token_seconds;
    out.completions.push_back(std::move(d));
  }
  for (auto& [id, out] : by_request) {
    auto it = I.live.find(id);
    if (it->second.all_done()) {
      out.finished = true;
      I.output.remove(id);
      I.live.erase(it);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

EngineStats LLMEngine::stats() const {
  EngineStats s = impl_->stats;
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  const cache::CachePlan& p = executor_->plan();
  if (p.num_blocks > 0)
    s.kv_usage = 1.0 - static_cast<double>(scheduler_->num_free_blocks()) /
                           static_cast<double>(p.num_blocks);
  if (executor_->request_slots() > 0)
    s.mamba_usage = 1.0 - static_cast<double>(scheduler_->num_free_slots()) /
                              static_cast<double>(executor_->request_slots());
  s.preemptions = scheduler_->num_preemptions();
  return s;
}

}  // namespace strata::engine
