// AsyncEngine: the engine thread. It alone touches the LLMEngine; callers hand it requests and
// aborts through a queue and get outputs through their sinks.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "core/log.h"
#include "engine/engine.h"

namespace strata::engine {

struct AsyncEngine::Impl {
  std::unique_ptr<LLMEngine> engine;
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::pair<EngineRequest, OutputSink>> incoming;
  std::deque<std::string> aborts;
  bool stopping = false, draining = false;
  int64_t queued = 0;  // submitted, not yet added to the engine
  EngineStats last_stats;
  std::unordered_map<std::string, OutputSink> sinks;  // engine thread only
  std::thread thread;

  void loop();
  void deliver(std::vector<RequestOutput> outs) {
    for (RequestOutput& o : outs) {
      auto it = sinks.find(o.request_id);
      if (it == sinks.end()) continue;
      const bool finished = o.finished;
      OutputSink sink = it->second;
      if (finished) sinks.erase(it);
      sink(std::move(o));
    }
  }
};

void AsyncEngine::Impl::loop() {
  for (;;) {
    std::deque<std::pair<EngineRequest, OutputSink>> in;
    std::deque<std::string> ab;
    bool stop = false, drain = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [&] {
        return stopping || !incoming.empty() || !aborts.empty() || engine->has_unfinished();
      });
      in.swap(incoming);
      ab.swap(aborts);
      queued -= static_cast<int64_t>(in.size());
      stop = stopping;
      drain = draining;
    }
    for (auto& [req, sink] : in) {
      const std::string id = req.id;
      try {
        if (stop && !drain) throw Error("the server is shutting down");
        if (!engine->add_request(std::move(req))) throw Error("the waiting queue is full");
        sinks[id] = std::move(sink);
      } catch (const std::exception& e) {
        RequestOutput o;
        o.request_id = id;
        o.finished = true;
        o.error = e.what();
        sink(std::move(o));
      }
    }
    for (const std::string& id : ab) engine->abort_request(id);
    if (stop && !drain)
      for (const auto& [id, sink] : sinks) engine->abort_request(id);
    try {
      deliver(engine->step());
    } catch (const std::exception& e) {
      // A failed step fails every request in it; the engine stays up for the next ones.
      log::error("engine step failed: {}", e.what());
      std::vector<std::string> ids;
      for (const auto& [id, sink] : sinks) ids.push_back(id);
      for (const std::string& id : ids) engine->abort_request(id);
      std::vector<RequestOutput> outs = engine->step();
      for (RequestOutput& o : outs) o.error = fmt::format("engine step failed: {}", e.what());
      deliver(std::move(outs));
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      last_stats = engine->stats();
    }
    if (stop && !engine->has_unfinished() && sinks.empty()) return;
  }
}

AsyncEngine::AsyncEngine(std::unique_ptr<LLMEngine> engine) : impl_(std::make_unique<Impl>()) {
  impl_->engine = std::move(engine);
  impl_->thread = std::thread([this] { impl_->loop(); });
}

AsyncEngine::~AsyncEngine() { shutdown(false); }

bool AsyncEngine::submit(EngineRequest request, OutputSink sink) {
  impl_->engine->validate(request);  // a bad request is the caller's error, on its thread
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopping) fail("the server is shutting down");
  const int64_t max_waiting = impl_->engine->max_waiting();
  if (max_waiting > 0 && impl_->queued + impl_->last_stats.waiting >= max_waiting) return false;
  impl_->incoming.emplace_back(std::move(request), std::move(sink));
  ++impl_->queued;
  impl_->wake.notify_one();
  return true;
}

void AsyncEngine::abort(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->aborts.push_back(request_id);
  impl_->wake.notify_one();
}

void AsyncEngine::shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    impl_->draining = drain;
    impl_->wake.notify_one();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last_stats;
}

int64_t AsyncEngine::max_model_len() const { return impl_->engine->max_model_len(); }

}  // namespace strata::engine
