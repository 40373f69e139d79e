#include "server/http_server.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "server/http_session.h"

namespace strata::server {

const std::string& HttpRequest::header(const std::string& lower_name) const {
  static const std::string empty;
  for (const auto& [k, v] : headers)
    if (k == lower_name) return v;
  return empty;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

struct HttpServer::Impl {
  std::shared_ptr<HttpShared> shared = std::make_shared<HttpShared>();
  tcp::acceptor acceptor{shared->ioc};
  asio::signal_set signals{shared->ioc};
  std::vector<std::thread> threads;
  int io_threads = 1;
  std::mutex mu;
  bool stopped = false;
  // Keeps run() returning only when stopped, even with nothing to do.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;

  void accept() {
    acceptor.async_accept(asio::make_strand(shared->ioc),
                          [this](beast::error_code ec, tcp::socket socket) {
                            if (ec) {
                              if (ec != asio::error::operation_aborted && acceptor.is_open()) {
                                log::warn("http: accept failed: {}", ec.message());
                                accept();
                              }
                              return;
                            }
                            on_accept(std::move(socket));
                            accept();
                          });
  }

  void on_accept(tcp::socket socket) {
    if (static_cast<size_t>(shared->open_connections.load()) >= shared->limits.max_connections) {
      shared->rejected++;
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<HttpSession>(std::move(socket), shared);
    {
      std::lock_guard lock(shared->sessions_mu);
      auto& v = shared->sessions;
      if (v.size() > 64 && v.size() > 2 * static_cast<size_t>(shared->open_connections.load()))
        std::erase_if(v, [](const auto& w) { return w.expired(); });
      v.push_back(session);
    }
    session->start();
  }
};

HttpServer::HttpServer(HttpRoutes routes, HttpLimits limits, int io_threads)
    : impl_(std::make_shared<Impl>()) {
  if (!routes.error_body) {
    routes.error_body = [](int status, const std::string& message) {
      nlohmann::json e = {{"message", message.substr(0, 1024)},
                          {"type", http_reason(status)},
                          {"param", nullptr},
                          {"code", status}};
      return std::pair<std::string, std::string>(
          "application/json",
          nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    };
  }
  impl_->shared->routes = std::move(routes);
  impl_->shared->limits = limits;
  impl_->io_threads = std::max(1, io_threads);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) fail("--host {}: not an IP address ({})", host, ec.message());
  tcp::endpoint ep(address, port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", host, port, ec.message());
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::start() {
  auto& im = *impl_;
  im.work.emplace(im.shared->ioc.get_executor());
  im.accept();
  for (int i = 0; i < im.io_threads; ++i)
    im.threads.emplace_back([&im] {
      try {
        im.shared->ioc.run();
      } catch (const std::exception& e) {
        log::error("http: I/O thread ended by an exception: {}", e.what());
      }
    });
}

void HttpServer::on_signal(std::function<void(int)> fn) {
  auto& s = impl_->signals;
  s.add(SIGINT);
  s.add(SIGTERM);
  s.async_wait([fn = std::move(fn)](beast::error_code ec, int sig) {
    if (!ec) fn(sig);
  });
}

void HttpServer::stop_accepting() {
  asio::post(impl_->shared->ioc, [im = impl_] {
    beast::error_code ignored;
    im->acceptor.close(ignored);
    im->signals.cancel(ignored);
  });
}

void HttpServer::stop() {
  auto& im = *impl_;
  {
    std::lock_guard lock(im.mu);
    if (im.stopped) return;
    im.stopped = true;
  }
  im.shared->stopped = true;
  {
    std::lock_guard lock(im.shared->sessions_mu);
    for (auto& w : im.shared->sessions)
      if (auto s = w.lock()) s->close();
    im.shared->sessions.clear();
  }
  stop_accepting();
  im.work.reset();
  // Let the closes run, then end the loop.
  asio::post(im.shared->ioc, [im = impl_] { im->shared->ioc.stop(); });
  for (auto& t : im.threads)
    if (t.joinable()) t.join();
  im.threads.clear();
  // Completion handlers still queued (cancelled reads, posted engine outputs) hold sessions:
  // run them here so every session is released while the io_context still exists.
  im.shared->ioc.restart();
  im.shared->ioc.poll();
}

HttpServerStats HttpServer::stats() const {
  const auto& s = *impl_->shared;
  return {s.open_connections.load(), s.total_connections.load(), s.requests.load(),
          s.rejected.load()};
}

}  // namespace strata::server
