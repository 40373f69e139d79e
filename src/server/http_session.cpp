#include "server/http_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>

#include "core/log.h"

namespace strata::server {

namespace {

// While an answer is in flight the read loop only watches for a disconnect; bytes a client
// pipelines meanwhile are kept up to this much, then reading pauses until the answer ends.
constexpr size_t kMaxPipelinedBytes = 64 * 1024;

// The exchange a handler answers through: forwards to the session on its strand, tagged with
// the request it belongs to.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<HttpSession> s, uint64_t id) : s_(std::move(s)), id_(id) {}
  void respond(int status, std::string content_type, std::string body,
               std::vector<std::pair<std::string, std::string>> extra) override {
    s_->respond(id_, status, std::move(content_type), std::move(body), std::move(extra));
  }
  void begin_stream(std::string content_type) override {
    s_->begin_stream(id_, std::move(content_type));
  }
  void write(std::string data) override { s_->write_chunk(id_, std::move(data)); }
  void end_stream() override { s_->end_stream(id_); }
  void post(std::function<void()> fn) override { s_->post(std::move(fn)); }
  bool open() const override { return s_->exchange_open(id_); }
  void on_disconnect(std::function<void()> fn) override {
    s_->set_disconnect_callback(id_, std::move(fn));
  }

 private:
  std::shared_ptr<HttpSession> s_;
  uint64_t id_;
};

template <class View>
std::string lower(const View& s) {
  std::string r(s.data(), s.size());
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, std::shared_ptr<HttpShared> shared)
    : socket_(std::move(socket)), shared_(std::move(shared)), deadline_(socket_.get_executor()) {
  beast::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
  shared_->open_connections++;
  shared_->total_connections++;
}

HttpSession::~HttpSession() { shared_->open_connections--; }

void HttpSession::start() {
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    self->arm(Timer::Idle);
    self->do_read();
  });
}

void HttpSession::close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->fail(); });
}

void HttpSession::post(std::function<void()> fn) {
  if (shared_->stopped) return;  // nothing would run it
  asio::post(socket_.get_executor(), std::move(fn));
}

void HttpSession::new_parser() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(shared_->limits.max_header_bytes));
  parser_->body_limit(shared_->limits.max_body_bytes);
  parser_->eager(true);
  continue_sent_ = false;
}

// ---- reading ---------------------------------------------------------------------------------

void HttpSession::do_read() {
  if (reading_ || closed_) return;
  if (in_flight_ && buffer_.size() >= kMaxPipelinedBytes) return;  // resumed when answered
  reading_ = true;
  socket_.async_read_some(asio::buffer(read_chunk_),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->on_read(ec, n);
                          });
}

void HttpSession::on_read(beast::error_code ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    // EOF or reset: the client is gone (a half-closed client cannot read our answer either).
    fail();
    return;
  }
  asio::buffer_copy(buffer_.prepare(n), asio::buffer(read_chunk_.data(), n));
  buffer_.commit(n);
  if (!in_flight_) parse_buffered();
  do_read();
}

void HttpSession::parse_buffered() {
  while (!in_flight_ && !closed_ && buffer_.size() > 0) {
    if (!parser_) new_parser();
    if (!receiving_) {
      receiving_ = true;
      arm(Timer::Receiving);
    }
    beast::error_code ec;
    size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if ((!ec || ec == http::error::need_more) && parser_->is_header_done() && !continue_sent_ &&
        !parser_->is_done()) {
      continue_sent_ = true;
      auto it = parser_->get().find(http::field::expect);
      if (it != parser_->get().end() && lower(it->value()) == "100-continue")
        queue_bytes("HTTP/1.1 100 Continue\r\n\r\n");
    }
    if (ec == http::error::need_more) return;
    if (ec) {
      if (ec == http::error::body_limit)
        transport_error(413, fmt::format("request body is larger than {} bytes",
                                         shared_->limits.max_body_bytes));
      else if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
        transport_error(431, fmt::format("request header is larger than {} bytes",
                                         shared_->limits.max_header_bytes));
      else
        transport_error(400, "malformed HTTP request: " + ec.message());
      return;
    }
    if (parser_->is_done())
      dispatch();
    else if (used == 0)
      return;
  }
}

void HttpSession::dispatch() {
  auto msg = parser_->release();
  parser_.reset();
  receiving_ = false;
  in_flight_ = true;
  answer_done_ = false;
  streaming_ = false;
  close_after_ = !msg.keep_alive();
  chunked_ = msg.version() >= 11;
  on_disconnect_ = nullptr;
  ++exchange_id_;
  arm(Timer::Off);
  shared_->requests++;

  HttpRequest req;
  req.method = std::string(msg.method_string().data(), msg.method_string().size());
  req.target = std::string(msg.target().data(), msg.target().size());
  req.path = req.target.substr(0, req.target.find('?'));
  for (const auto& f : msg) req.headers.emplace_back(lower(f.name_string()), std::string(f.value().data(), f.value().size()));
  req.body = std::move(msg.body());
  req.remote = remote_;

  const auto& routes = shared_->routes;
  auto by_path = routes.by_path.find(req.path);
  if (by_path == routes.by_path.end()) {
    auto [type, body] = routes.error_body(
        404, fmt::format("no route {} {}", req.method.substr(0, 20), req.path.substr(0, 200)));
    respond(exchange_id_, 404, type, body, {});
    return;
  }
  auto handler = by_path->second.find(req.method);
  if (handler == by_path->second.end()) {
    std::string allowed;
    for (const auto& [m, h] : by_path->second) allowed += (allowed.empty() ? "" : ", ") + m;
    std::vector<std::pair<std::string, std::string>> extra = {{"Allow", allowed}};
    auto [type, body] = routes.error_body(405, fmt::format("method {} is not allowed for {}",
                                                           req.method.substr(0, 20), req.path));
    respond(exchange_id_, 405, type, body, extra);
    return;
  }
  auto ex = std::make_shared<Exchange>(shared_from_this(), exchange_id_);
  try {
    handler->second(req, ex);
  } catch (const std::exception& e) {
    // A handler that throws is a bug in the server, not bad input: log it and answer 500.
    log::error("http: handler for {} {} threw: {}", req.method, req.path, e.what());
    if (exchange_open(exchange_id_) && !streaming_) {
      auto [type, body] = routes.error_body(500, "internal server error");
      respond(exchange_id_, 500, type, body, {});
    }
  }
}

void HttpSession::transport_error(int status, const std::string& message) {
  // The request stream cannot be trusted past a transport error: answer and close.
  in_flight_ = true;
  close_after_ = true;
  streaming_ = false;
  chunked_ = true;
  ++exchange_id_;
  parser_.reset();
  receiving_ = false;
  auto [type, body] = shared_->routes.error_body(status, message);
  respond(exchange_id_, status, type, body, {});
}

// ---- writing ---------------------------------------------------------------------------------

std::string HttpSession::head(int status, const std::string& content_type,
                              const std::string& length_or_te,
                              const std::vector<std::pair<std::string, std::string>>& extra) const {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\nServer: strata\r\n", status, http_reason(status));
  if (!content_type.empty()) h += fmt::format("Content-Type: {}\r\n", content_type);
  h += length_or_te;
  h += close_after_ ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  for (const auto& [k, v] : extra) h += fmt::format("{}: {}\r\n", k, v);
  h += "\r\n";
  return h;
}

bool HttpSession::exchange_open(uint64_t id) const {
  return !closed_ && in_flight_ && !answer_done_ && id == exchange_id_;
}

void HttpSession::respond(uint64_t id, int status, std::string content_type, std::string body,
                          std::vector<std::pair<std::string, std::string>> extra) {
  if (!exchange_open(id) || streaming_) return;
  answer_done_ = true;
  if (status >= 400 && !closed_ && shared_->stopped) close_after_ = true;
  std::string bytes = head(status, content_type, fmt::format("Content-Length: {}\r\n", body.size()),
                           extra);
  bytes += body;
  queue_bytes(std::move(bytes));
}

void HttpSession::begin_stream(uint64_t id, std::string content_type) {
  if (!exchange_open(id) || streaming_) return;
  streaming_ = true;
  if (!chunked_) close_after_ = true;  // HTTP/1.0: the end of the stream is the end of the body
  std::vector<std::pair<std::string, std::string>> extra = {{"Cache-Control", "no-cache"}};
  queue_bytes(head(200, content_type, chunked_ ? "Transfer-Encoding: chunked\r\n" : "", extra));
}

void HttpSession::write_chunk(uint64_t id, std::string data) {
  if (!exchange_open(id) || !streaming_ || data.empty()) return;
  if (chunked_) {
    std::string framed = fmt::format("{:x}\r\n", data.size());
    framed += data;
    framed += "\r\n";
    queue_bytes(std::move(framed));
  } else {
    queue_bytes(std::move(data));
  }
}

void HttpSession::end_stream(uint64_t id) {
  if (!exchange_open(id) || !streaming_) return;
  answer_done_ = true;
  if (chunked_)
    queue_bytes("0\r\n\r\n");
  else if (!write_busy_ && pending_.empty())
    answer_finished();
}

void HttpSession::set_disconnect_callback(uint64_t id, std::function<void()> fn) {
  if (id == exchange_id_ && in_flight_) on_disconnect_ = std::move(fn);
}

void HttpSession::queue_bytes(std::string bytes) {
  if (closed_) return;
  pending_bytes_ += bytes.size();
  pending_.push_back(std::move(bytes));
  if (pending_bytes_ > shared_->limits.max_pending_write_bytes) {
    log::warn("http: {} reads too slowly ({} bytes queued): dropped", remote_, pending_bytes_);
    fail();
    return;
  }
  if (!write_busy_) flush();
}

void HttpSession::flush() {
  if (pending_.empty() || closed_) return;
  writing_.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
  pending_.clear();
  pending_bytes_ = 0;
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(writing_.size());
  for (const auto& s : writing_) bufs.push_back(asio::buffer(s));
  write_busy_ = true;
  arm(Timer::Writing);
  asio::async_write(socket_, bufs, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_write(ec);
  });
}

void HttpSession::on_write(beast::error_code ec) {
  write_busy_ = false;
  writing_.clear();
  if (closed_) return;
  if (ec) {
    fail();
    return;
  }
  if (!pending_.empty()) {
    flush();
    return;
  }
  // Back to the phase's own deadline (a "100 Continue" went out while receiving).
  arm(!in_flight_ && receiving_ ? Timer::Receiving : Timer::Off);
  if (answer_done_ && in_flight_) answer_finished();
}

void HttpSession::answer_finished() {
  in_flight_ = false;
  on_disconnect_ = nullptr;
  if (close_after_ || shared_->stopped) {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    closed_ = true;
    arm(Timer::Off);
    socket_.close(ignored);
    return;
  }
  arm(Timer::Idle);
  parse_buffered();
  do_read();
}

// ---- deadlines and failure -------------------------------------------------------------------

void HttpSession::arm(Timer what) {
  timer_ = what;
  ++timer_gen_;
  if (what == Timer::Off || closed_) {
    deadline_.cancel();
    return;
  }
  const auto& l = shared_->limits;
  auto after = what == Timer::Idle        ? l.keep_alive_timeout
               : what == Timer::Receiving ? l.request_timeout
                                          : l.write_timeout;
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this(), gen = timer_gen_](beast::error_code ec) {
    if (!ec && gen == self->timer_gen_) self->on_deadline();
  });
}

void HttpSession::on_deadline() {
  if (closed_) return;
  if (timer_ == Timer::Receiving && !in_flight_) {
    transport_error(408, fmt::format("the request was not received within {} ms",
                                     shared_->limits.request_timeout.count()));
    // A client that does not read its 408 is dropped by the write deadline.
    return;
  }
  fail();  // idle keep-alive ended, or a write stalled
}

void HttpSession::fail() {
  if (closed_) return;
  closed_ = true;
  ++timer_gen_;
  deadline_.cancel();
  beast::error_code ignored;
  socket_.close(ignored);
  pending_.clear();
  pending_bytes_ = 0;
  if (in_flight_ && !answer_done_ && on_disconnect_) {
    auto fn = std::move(on_disconnect_);
    on_disconnect_ = nullptr;
    try {
      fn();
    } catch (const std::exception& e) {
      log::error("http: disconnect callback threw: {}", e.what());
    }
  }
  in_flight_ = false;
}

}  // namespace strata::server
