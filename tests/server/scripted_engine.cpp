#include "scripted_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "text/tokenizer.h"

namespace strata::server::testing {

using Clock = std::chrono::steady_clock;

struct ScriptedEngine::Live {
  engine::EngineRequest request;
  OutputSink sink;
  std::vector<int64_t> generated;
  std::vector<bool> done;
  double queue_seconds = 0, first_token_seconds = -1;
};

ScriptedEngine::ScriptedEngine(ScriptedEngineOptions options) : options_(std::move(options)) {
  if (!options_.script.empty()) {
    STRATA_CHECK(options_.tokenizer != nullptr, "a scripted text needs a tokenizer");
    script_ids_ = options_.tokenizer->encode(options_.script, /*add_special_tokens=*/false);
  }
  thread_ = std::thread([this] { loop(); });
}

ScriptedEngine::~ScriptedEngine() { shutdown(false); }

bool ScriptedEngine::submit(engine::EngineRequest request, OutputSink sink) {
  // The checks a real engine makes at add_request (the protocol layer made them first).
  if (request.prompt.empty()) fail("the prompt is empty");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= options_.vocab_size) fail("prompt token id {} is out of vocabulary", id);
  request.params.validate(options_.vocab_size);
  std::lock_guard lock(mu_);
  if (stop_) fail("the engine is shut down");
  if (options_.max_waiting > 0 && static_cast<int64_t>(waiting_.size()) >= options_.max_waiting) {
    if (!options_.refuse_with_output) return false;
    engine::RequestOutput o;
    o.request_id = request.id;
    o.finished = true;
    o.error = "the waiting queue is full";
    refusals_.emplace_back(std::move(sink), std::move(o));
    cv_.notify_all();
    return true;
  }
  auto live = std::make_shared<Live>();
  const int32_t n = request.params.n;
  live->request = std::move(request);
  live->sink = std::move(sink);
  live->generated.assign(n, 0);
  live->done.assign(n, false);
  waiting_.push_back(std::move(live));
  cv_.notify_all();
  return true;
}

void ScriptedEngine::abort(const std::string& request_id) {
  std::lock_guard lock(mu_);
  aborts_.push_back(request_id);
  cv_.notify_all();
}

engine::EngineStats ScriptedEngine::stats() const {
  std::lock_guard lock(mu_);
  engine::EngineStats s;
  s.running = static_cast<int64_t>(running_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.kv_usage = static_cast<double>(running_.size()) / static_cast<double>(options_.max_running);
  s.mamba_usage = s.kv_usage;
  s.prompt_tokens = prompt_tokens_;
  s.generation_tokens = generation_tokens_;
  s.steps = steps_;
  return s;
}

int64_t ScriptedEngine::live_requests() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(running_.size() + waiting_.size());
}

int64_t ScriptedEngine::aborted() const {
  std::lock_guard lock(mu_);
  return aborted_;
}

void ScriptedEngine::shutdown(bool drain) {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
    drain_ = drain;
    cv_.notify_all();
  }
  thread_.join();
}

int32_t ScriptedEngine::token(const std::vector<int32_t>& prompt, int32_t index, int64_t k) const {
  if (!script_ids_.empty())
    return k < static_cast<int64_t>(script_ids_.size()) ? script_ids_[k] : options_.eos_id;
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : prompt) h = (h ^ static_cast<uint64_t>(id)) * 1099511628211ull;
  const uint64_t span = static_cast<uint64_t>(options_.vocab_size - 16);
  return 16 + static_cast<int32_t>((h + 7 * static_cast<uint64_t>(k) + 13 * index) % span);
}

std::vector<int32_t> ScriptedEngine::expected_ids(const std::vector<int32_t>& prompt,
                                                  int32_t index, int64_t count) const {
  std::vector<int32_t> ids;
  for (int64_t k = 0; k < count; ++k) ids.push_back(token(prompt, index, k));
  return ids;
}

void ScriptedEngine::loop() {
  std::vector<std::pair<OutputSink, engine::RequestOutput>> out;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, options_.step_interval, [&] { return stop_; });
      const bool empty = waiting_.empty() && running_.empty();
      if (stop_ && (!drain_ || empty)) {
        // Everything left ends as aborted.
        for (auto& q : {&waiting_}) {
          for (auto& l : *q) running_.push_back(l);
          q->clear();
        }
        for (auto& l : running_) {
          engine::RequestOutput o;
          o.request_id = l->request.id;
          o.finished = true;
          o.prompt_tokens = static_cast<int64_t>(l->request.prompt.size());
          for (int32_t i = 0; i < l->request.params.n; ++i)
            if (!l->done[i]) {
              engine::CompletionDelta d;
              d.index = i;
              d.finish = engine::FinishReason::Abort;
              d.num_generated = l->generated[i];
              o.completions.push_back(d);
            }
          out.emplace_back(l->sink, std::move(o));
          aborted_++;
        }
        running_.clear();
        lock.unlock();
        for (auto& [sink, o] : out) sink(std::move(o));
        return;
      }
      step(out);
    }
    for (auto& [sink, o] : out) sink(std::move(o));
    out.clear();
  }
}

void ScriptedEngine::step(std::vector<std::pair<OutputSink, engine::RequestOutput>>& out) {
  const auto now = Clock::now();
  for (auto& r : refusals_) out.push_back(std::move(r));
  refusals_.clear();
  // Aborts first: a request aborted while queued never runs.
  for (const auto& id : aborts_) {
    auto finish = [&](std::shared_ptr<Live> l) {
      engine::RequestOutput o;
      o.request_id = id;
      o.finished = true;
      o.prompt_tokens = static_cast<int64_t>(l->request.prompt.size());
      for (int32_t i = 0; i < l->request.params.n; ++i)
        if (!l->done[i]) {
          engine::CompletionDelta d;
          d.index = i;
          d.finish = engine::FinishReason::Abort;
          d.num_generated = l->generated[i];
          o.completions.push_back(d);
        }
      out.emplace_back(l->sink, std::move(o));
      aborted_++;
    };
    auto w = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const auto& l) { return l->request.id == id; });
    if (w != waiting_.end()) {
      finish(*w);
      waiting_.erase(w);
      continue;
    }
    auto r = std::find_if(running_.begin(), running_.end(),
                          [&](const auto& l) { return l->request.id == id; });
    if (r != running_.end()) {
      finish(*r);
      running_.erase(r);
    }
  }
  aborts_.clear();
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_running) {
    auto l = waiting_.front();
    waiting_.pop_front();
    l->queue_seconds = std::chrono::duration<double>(now - l->request.arrival).count();
    prompt_tokens_ += static_cast<int64_t>(l->request.prompt.size());
    running_.push_back(std::move(l));
  }
  if (running_.empty()) return;
  steps_++;
  for (auto& l : running_) {
    const auto& p = l->request.params;
    engine::RequestOutput o;
    o.request_id = l->request.id;
    o.prompt_tokens = static_cast<int64_t>(l->request.prompt.size());
    o.queue_seconds = l->queue_seconds;
    if (l->first_token_seconds < 0)
      l->first_token_seconds = std::chrono::duration<double>(now - l->request.arrival).count();
    o.first_token_seconds = l->first_token_seconds;
    bool all_done = true;
    for (int32_t i = 0; i < p.n; ++i) {
      if (l->done[i]) continue;
      engine::CompletionDelta d;
      d.index = i;
      const int32_t id = token(l->request.prompt, i, l->generated[i]);
      l->generated[i]++;
      generation_tokens_++;
      d.token_ids.push_back(id);
      const bool eos = id == options_.eos_id && !p.ignore_eos;
      const bool stop_id =
          std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end();
      if (!eos && !stop_id && p.detokenize)
        d.text = options_.tokenizer ? options_.tokenizer->decode(std::vector<int32_t>{id}, true)
                                    : fmt::format(" w{}", id);
      if (p.logprobs >= 0) {
        engine::TokenLogprobs lp;
        lp.token = id;
        lp.logprob = -0.25f;
        lp.rank = 1;
        for (int32_t k = 0; k < p.logprobs; ++k)
          lp.top.emplace_back(k == 0 ? id : 16 + (id + k) % (options_.vocab_size - 16),
                              -0.25f - static_cast<float>(k));
        d.logprobs.push_back(lp);
      }
      if (eos || stop_id) {
        d.finish = engine::FinishReason::Stop;
        if (stop_id) {
          d.stop_reason = std::to_string(id);
          d.stop_token_id = id;
        }
      } else if (l->generated[i] >= p.max_tokens) {
        d.finish = engine::FinishReason::Length;
      }
      d.num_generated = l->generated[i];
      if (d.finish != engine::FinishReason::None) l->done[i] = true;
      all_done = all_done && l->done[i];
      o.completions.push_back(std::move(d));
    }
    o.finished = all_done;
    out.emplace_back(l->sink, std::move(o));
  }
  std::erase_if(running_, [](const auto& l) {
    return std::all_of(l->done.begin(), l->done.end(), [](bool d) { return d; });
  });
}

}  // namespace strata::server::testing
