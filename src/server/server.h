// The OpenAI-compatible server: routes (/v1/completions, /v1/chat/completions, /v1/models,
// /health, /ping, /version, /tokenize, /detokenize, /metrics), the API key, the bridge from
// the HTTP transport to the engine (requests parsed on the I/O threads by the protocol layer,
// submitted to the engine thread, outputs posted back onto each connection's strand), metrics,
// and shutdown. `strata serve` is this plus model loading.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/server_call.h"
#include "server/server_engine.h"

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string api_key;  // empty: no key; else every route but health / version / metrics needs it
  int io_threads = 2;
  HttpLimits limits;
  // On SIGINT / SIGTERM: let in-flight requests finish for up to this long, then abort the rest.
  std::chrono::milliseconds shutdown_timeout{0};
  std::string cache_info_labels;  // vllm:cache_config_info labels (k="v",...)
};

class OpenAIServer {
 public:
  // `ctx` must outlive the server (its tokenizer and chat builder are borrowed).
  OpenAIServer(const ServingContext& ctx, std::unique_ptr<EngineClient> engine,
               ServerOptions options);
  ~OpenAIServer();  // shutdown()

  void start();  // listens and starts the I/O threads; throws strata::Error
  uint16_t port() const;
  // Blocks until SIGINT / SIGTERM (or request_shutdown()), then shuts down.
  void run_until_shutdown();
  void request_shutdown();
  // Stops accepting, finishes or aborts in-flight requests (shutdown_timeout), stops the engine
  // and closes every connection. Idempotent.
  void shutdown();

  // Engine requests submitted and not finished (the leak check of the tests).
  int64_t requests_in_flight() const { return shared_->in_flight.load(); }
  std::string metrics_text() const;

 private:
  void add_routes(HttpRoutes& routes);
  bool authorized(const HttpRequest& req) const;
  void generate(const HttpRequest& req, std::shared_ptr<HttpExchange> ex, Endpoint endpoint);

  const ServingContext& ctx_;
  std::unique_ptr<EngineClient> engine_;
  ServerOptions options_;
  ServerMetrics metrics_;
  std::shared_ptr<CallShared> shared_ = std::make_shared<CallShared>();
  std::unique_ptr<HttpServer> http_;
  int64_t created_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false, shut_down_ = false;
};

// Constant-time comparison (the time does not depend on where the strings differ).
bool constant_time_equal(const std::string& a, const std::string& b);

// The body of a transport-level error answer (OpenAI's shape, bounded).
std::pair<std::string, std::string> transport_error_body(int status, const std::string& message);

}  // namespace strata::server
