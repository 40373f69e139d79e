#include "server/server_call.h"

#include "core/check.h"
#include "core/log.h"

namespace strata::server {

void reply_error(HttpExchange& ex, const ApiError& e) {
  ex.respond(e.status, "application/json", e.body_text());
}

GenerationCall::GenerationCall(ParsedRequest parsed, std::shared_ptr<HttpExchange> ex,
                               std::shared_ptr<CallShared> shared)
    : requests_(std::move(parsed.requests)),
      builder_(parsed.plan, *shared->ctx),
      stream_(parsed.plan.stream),
      n_(parsed.plan.n),
      ex_(std::move(ex)),
      shared_(std::move(shared)) {
  const size_t k = requests_.size();
  timers_.resize(k);
  submitted_.assign(k, false);
  done_.assign(k, false);
  for (const auto& r : requests_) {
    ids_.push_back(r.id);
    max_tokens_.push_back(r.params.max_tokens);
  }
}

void GenerationCall::start() {
  std::weak_ptr<GenerationCall> weak = weak_from_this();
  ex_->on_disconnect([weak] {
    if (auto self = weak.lock()) {
      self->answered_ = true;
      self->abort_unfinished();
    }
  });
  for (size_t i = 0; i < requests_.size(); ++i) {
    timers_[i].arrival = requests_[i].arrival;
    auto self = shared_from_this();
    auto sink = [self, i](engine::RequestOutput out) {
      const auto now = Clock::now();
      self->ex_->post([self, i, out = std::move(out), now]() mutable {
        self->on_output(i, std::move(out), now);
      });
    };
    bool queued = false;
    try {
      queued = shared_->engine->submit(std::move(requests_[i]), std::move(sink));
    } catch (const Error& e) {
      abort_unfinished();
      fail_answer(bad_request(e.what()));
      return;
    }
    if (!queued) {
      abort_unfinished();
      fail_answer(service_unavailable("the waiting queue is full; retry later"));
      return;
    }
    submitted_[i] = true;
    shared_->in_flight++;
  }
  requests_.clear();
}

void GenerationCall::abort_unfinished() {
  if (!shared_->engine_alive) return;
  for (size_t i = 0; i < ids_.size(); ++i)
    if (submitted_[i] && !done_[i]) shared_->engine->abort(ids_[i]);
}

void GenerationCall::fail_answer(const ApiError& e) {
  if (answered_) return;
  answered_ = true;
  if (!began_) {
    reply_error(*ex_, e);
    return;
  }
  for (const auto& event : stream_error_events(e)) ex_->write(event);
  ex_->end_stream();
}

void GenerationCall::answer(const std::vector<std::string>& events) {
  if (events.empty()) return;
  if (!began_) {
    ex_->begin_stream("text/event-stream");
    began_ = true;
  }
  for (const auto& e : events) ex_->write(e);
}

void GenerationCall::on_output(size_t i, engine::RequestOutput out, Clock::time_point now) {
  shared_->metrics->on_output(timers_[i], out, now);
  if (out.finished && !done_[i]) {
    done_[i] = true;
    shared_->in_flight--;
    const char* reason = "abort";
    for (const auto& c : out.completions)
      if (c.finish != engine::FinishReason::None) reason = engine::finish_reason_name(c.finish);
    shared_->metrics->on_finished(timers_[i], out, reason, n_, max_tokens_[i], now);
  }
  if (answered_) return;
  if (!ex_->open()) {
    answered_ = true;
    abort_unfinished();
    return;
  }
  // The engine refused the request at admission (it answers such refusals as a finished output
  // with an error and no token): a full waiting queue or a shutdown is a 503, not a 500.
  if (out.finished && !out.error.empty() && timers_[i].generated == 0 &&
      (out.error.find("queue is full") != std::string::npos ||
       out.error.find("shutting down") != std::string::npos)) {
    abort_unfinished();
    fail_answer(service_unavailable(out.error));
    return;
  }
  std::vector<std::string> events = builder_.on_output(out);
  if (builder_.error()) {
    if (stream_) answer(events);
    abort_unfinished();
    fail_answer(*builder_.error());
    return;
  }
  if (stream_) {
    answer(events);
    if (builder_.finished()) {
      if (!began_) {
        ex_->begin_stream("text/event-stream");
        began_ = true;
      }
      for (const auto& e : builder_.stream_end()) ex_->write(e);
      ex_->end_stream();
      answered_ = true;
    }
  } else if (builder_.finished()) {
    ex_->respond(200, "application/json", dump_json(builder_.body()));
    answered_ = true;
  }
}

}  // namespace strata::server
