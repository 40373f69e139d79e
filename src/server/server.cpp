#include "server/server.h"

#include <fmt/format.h>

#include <ctime>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "server/openai_errors.h"
#include "server/openai_misc.h"

namespace strata::server {

namespace {

constexpr const char* kVersion = "0.1.0";

void reply_json(HttpExchange& ex, const nlohmann::ordered_json& body) {
  ex.respond(200, "application/json", dump_json(body));
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Walks the longer length whatever the contents; the length difference is folded in.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::pair<std::string, std::string> transport_error_body(int status, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  switch (status) {
    case 404: e = not_found(message); break;
    case 405: e = method_not_allowed(message); break;
    case 413: e.type = "PayloadTooLarge"; break;
    case 500: e = internal_error(message); break;
    default: e.type = status < 500 ? "BadRequestError" : "InternalServerError"; break;
  }
  e.status = status;
  return {"application/json", e.body_text()};
}

OpenAIServer::OpenAIServer(const ServingContext& ctx, std::unique_ptr<EngineClient> engine,
                           ServerOptions options)
    : ctx_(ctx),
      engine_(std::move(engine)),
      options_(std::move(options)),
      metrics_(ctx.served_model_name, ctx.max_model_len, options_.cache_info_labels) {
  created_ = static_cast<int64_t>(std::time(nullptr));
  shared_->engine = engine_.get();
  shared_->metrics = &metrics_;
  shared_->ctx = &ctx_;
  HttpRoutes routes;
  routes.error_body = transport_error_body;
  add_routes(routes);
  http_ = std::make_unique<HttpServer>(std::move(routes), options_.limits, options_.io_threads);
}

OpenAIServer::~OpenAIServer() { shutdown(); }

bool OpenAIServer::authorized(const HttpRequest& req) const {
  if (options_.api_key.empty()) return true;
  const std::string& h = req.header("authorization");
  static const std::string kBearer = "Bearer ";
  if (h.size() < kBearer.size() || h.compare(0, kBearer.size(), kBearer) != 0) {
    constant_time_equal(h, options_.api_key);  // same work whatever the header
    return false;
  }
  return constant_time_equal(h.substr(kBearer.size()), options_.api_key);
}

void OpenAIServer::add_routes(HttpRoutes& routes) {
  // Open routes: probes and scrapes (as vLLM: the key guards the API, not /health or /metrics).
  auto health = [this](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    if (!shared_->accepting) {
      reply_error(*ex, service_unavailable("the server is shutting down"));
      return;
    }
    ex->respond(200, "", "");
  };
  routes.add("GET", "/health", health);
  routes.add("GET", "/ping", health);
  routes.add("POST", "/ping", health);
  routes.add("GET", "/v1/health", health);
  routes.add("GET", "/version", [](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    reply_json(*ex, {{"version", kVersion}});
  });
  routes.add("GET", "/metrics", [this](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_text());
  });

  // Guarded routes.
  auto guarded = [this](auto fn) {
    return [this, fn](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
      if (!authorized(req)) {
        reply_error(*ex, unauthorized());
        return;
      }
      fn(req, std::move(ex));
    };
  };
  routes.add("GET", "/v1/models", guarded([this](const HttpRequest&, auto ex) {
               reply_json(*ex, models_body(ctx_, created_));
             }));
  auto json_result = [](HttpExchange& ex, const JsonResult& r) {
    if (const auto* e = std::get_if<ApiError>(&r))
      reply_error(ex, *e);
    else
      reply_json(ex, std::get<nlohmann::ordered_json>(r));
  };
  routes.add("POST", "/tokenize", guarded([this, json_result](const HttpRequest& req, auto ex) {
               json_result(*ex, handle_tokenize(req.body, ctx_));
             }));
  routes.add("POST", "/detokenize", guarded([this, json_result](const HttpRequest& req, auto ex) {
               json_result(*ex, handle_detokenize(req.body, ctx_));
             }));
  routes.add("POST", "/v1/completions", guarded([this](const HttpRequest& req, auto ex) {
               generate(req, std::move(ex), Endpoint::Completions);
             }));
  routes.add("POST", "/v1/chat/completions", guarded([this](const HttpRequest& req, auto ex) {
               generate(req, std::move(ex), Endpoint::ChatCompletions);
             }));
}

void OpenAIServer::generate(const HttpRequest& req, std::shared_ptr<HttpExchange> ex,
                            Endpoint endpoint) {
  if (!shared_->accepting) {
    reply_error(*ex, service_unavailable("the server is shutting down"));
    return;
  }
  const std::string& request_id = req.header("x-request-id");
  ParseResult parsed = endpoint == Endpoint::Completions
                           ? parse_completion_request(req.body, ctx_, request_id)
                           : parse_chat_request(req.body, ctx_, request_id);
  if (const auto* e = std::get_if<ApiError>(&parsed)) {
    reply_error(*ex, *e);
    return;
  }
  auto call = std::make_shared<GenerationCall>(std::move(std::get<ParsedRequest>(parsed)),
                                               std::move(ex), shared_);
  call->start();
}

std::string OpenAIServer::metrics_text() const {
  ServerGauges g;
  g.open_connections = http_ ? http_->stats().open_connections : 0;
  g.requests_in_flight = shared_->in_flight.load();
  return metrics_.render(engine_->stats(), g);
}

void OpenAIServer::start() {
  http_->listen(options_.host, options_.port);
  http_->on_signal([this](int sig) {
    log::info("serve: signal {}: shutting down", sig);
    request_shutdown();
  });
  http_->start();
}

uint16_t OpenAIServer::port() const { return http_->port(); }

void OpenAIServer::request_shutdown() {
  std::lock_guard lock(mu_);
  shutdown_requested_ = true;
  cv_.notify_all();
}

void OpenAIServer::run_until_shutdown() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return shutdown_requested_; });
  }
  shutdown();
}

void OpenAIServer::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  using Clock = std::chrono::steady_clock;
  shared_->accepting = false;
  http_->stop_accepting();
  // Let in-flight requests finish for up to shutdown_timeout, then abort what is left.
  const auto drain_until = Clock::now() + options_.shutdown_timeout;
  while (shared_->in_flight.load() > 0 && Clock::now() < drain_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t left = shared_->in_flight.load();
  if (left > 0) log::info("serve: aborting {} in-flight request(s)", left);
  shared_->engine_alive = false;  // the shutdown below aborts everything left
  engine_->shutdown(/*drain=*/false);  // their sinks get the final (abort) outputs
  // Give the aborted answers a moment to reach their clients, then close everything.
  const auto flush_until = Clock::now() + std::chrono::seconds(2);
  while (shared_->in_flight.load() > 0 && Clock::now() < flush_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  http_->stop();
}

}  // namespace strata::server
