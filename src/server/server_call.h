// One generation call (a /v1/completions or /v1/chat/completions request): its engine
// requests, their sinks (run on the engine thread, they only post onto the connection's
// strand), the response builder fed on the strand, metrics, and the abort of every engine
// request when the client goes away.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/server_engine.h"

namespace strata::server {

// What every call shares with the server.
struct CallShared {
  EngineClient* engine = nullptr;
  ServerMetrics* metrics = nullptr;
  const ServingContext* ctx = nullptr;
  std::atomic<bool> accepting{true};     // false once shutdown began: new calls get 503
  std::atomic<bool> engine_alive{true};  // aborts after shutdown are skipped
  std::atomic<int64_t> in_flight{0};      // engine requests submitted and not finished
};

void reply_error(HttpExchange& ex, const ApiError& e);

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  GenerationCall(ParsedRequest parsed, std::shared_ptr<HttpExchange> ex,
                 std::shared_ptr<CallShared> shared);
  // Submits every engine request (on the strand); answers 400 / 503 itself when the engine
  // refuses one, aborting those already submitted.
  void start();

 private:
  using Clock = std::chrono::steady_clock;
  void on_output(size_t index, engine::RequestOutput out, Clock::time_point now);
  void answer(const std::vector<std::string>& events);
  void fail_answer(const ApiError& e);
  void abort_unfinished();

  std::vector<engine::EngineRequest> requests_;  // moved out at submit
  std::vector<std::string> ids_;
  std::vector<int64_t> max_tokens_;
  std::vector<ServerMetrics::RequestTimer> timers_;
  std::vector<bool> submitted_, done_;
  ResponseBuilder builder_;
  bool stream_ = false;
  int32_t n_ = 1;
  std::shared_ptr<HttpExchange> ex_;
  std::shared_ptr<CallShared> shared_;
  bool began_ = false, answered_ = false;
};

}  // namespace strata::server
