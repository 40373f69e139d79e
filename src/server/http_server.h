// The HTTP transport: Boost.Beast over Boost.Asio, a small pool of I/O threads, one strand per
// connection (no thread per connection), HTTP/1.1 keep-alive, limits on header and body sizes
// and on the time to send them, chunked streaming for SSE. Handlers run on the connection's
// strand and answer through an HttpExchange, now or later (from the engine thread, by posting
// onto the strand). This header needs no Asio: the OpenAI layer above stays cheap to compile.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata::server {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + headers; over it: 431
  size_t max_body_bytes = 8u << 20;     // over it: 413
  // From the first byte of a request to its last; a slow sender is answered 408 and closed.
  std::chrono::milliseconds request_timeout{30'000};
  // An idle keep-alive connection is closed after this.
  std::chrono::milliseconds keep_alive_timeout{60'000};
  // A client that does not read its response (write blocked this long) is dropped.
  std::chrono::milliseconds write_timeout{60'000};
  // Response bytes queued for a client that reads slower than we produce; over it: dropped.
  size_t max_pending_write_bytes = 16u << 20;
  size_t max_connections = 16384;  // further connections are accepted and closed at once
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent, e.g. "/v1/models?x=1"
  std::string path;    // target without the query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string remote;  // "ip:port"

  // First header of that (lower-case) name, or "".
  const std::string& header(const std::string& lower_name) const;
};

// One request's answer. Methods must be called on the connection's strand: from the handler
// itself, or inside post(). Exactly one of respond() or begin_stream() ... end_stream().
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  virtual void respond(int status, std::string content_type, std::string body,
                       std::vector<std::pair<std::string, std::string>> extra_headers = {}) = 0;
  // A 200 with Transfer-Encoding: chunked (SSE when content_type is text/event-stream).
  virtual void begin_stream(std::string content_type) = 0;
  virtual void write(std::string data) = 0;  // one chunk; coalesced with queued ones
  virtual void end_stream() = 0;

  // Runs fn on the connection's strand (callable from any thread, never blocks). fn runs even
  // after the client went away (check open()), unless the server has stopped.
  virtual void post(std::function<void()> fn) = 0;
  // False once the client disconnected, a write failed or timed out, or the answer finished.
  virtual bool open() const = 0;
  // Called once, on the strand, if the client goes away before the answer finished.
  virtual void on_disconnect(std::function<void()> fn) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;

// Routes by exact path (no decoding, no normalisation: "//v1/x" and "/v1%2Fx" are unknown).
// Unknown path -> `not_found`; known path, other method -> `method_not_allowed`.
struct HttpRoutes {
  std::map<std::string, std::map<std::string, HttpHandler>> by_path;  // path -> method -> handler
  // Called with (status, message) for transport-level errors (400, 404, 405, 408, 413, 431);
  // returns (content type, body). The default is a plain OpenAI-style error.
  std::function<std::pair<std::string, std::string>(int, const std::string&)> error_body;
  void add(const std::string& method, const std::string& path, HttpHandler h) {
    by_path[path][method] = std::move(h);
  }
};

struct HttpServerStats {
  int64_t open_connections = 0, total_connections = 0, requests = 0;
  int64_t rejected_connections = 0;  // over max_connections
};

class HttpServer {
 public:
  HttpServer(HttpRoutes routes, HttpLimits limits, int io_threads);
  ~HttpServer();  // stop() + join

  // Binds and listens; port 0 picks a free one (port() tells which). Throws strata::Error.
  void listen(const std::string& host, uint16_t port);
  uint16_t port() const;
  // Starts the I/O threads (returns at once).
  void start();
  // Calls fn (once, on an I/O thread) on SIGINT or SIGTERM.
  void on_signal(std::function<void(int)> fn);
  // Stops accepting; existing connections keep going until their answers end.
  void stop_accepting();
  // Closes every connection and stops the I/O threads; waits for them. Not from an I/O thread.
  void stop();
  HttpServerStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// "200 OK"-style reason phrase.
const char* http_reason(int status);

}  // namespace strata::server
