// One HTTP connection (private to the transport): a read loop that always has one read
// pending (it feeds the request parser between requests and notices a disconnect while an
// answer is in flight), a write queue that coalesces chunks, and one deadline timer whose job
// depends on the phase (keep-alive idle, receiving a request, writing).
#pragma once

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/http_server.h"

namespace strata::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// What every session shares with the server.
struct HttpShared {
  asio::io_context ioc;
  HttpRoutes routes;
  HttpLimits limits;
  std::atomic<bool> stopped{false};
  std::atomic<int64_t> open_connections{0}, total_connections{0}, requests{0}, rejected{0};
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<class HttpSession>> sessions;  // pruned on accept
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, std::shared_ptr<HttpShared> shared);
  ~HttpSession();
  void start();
  void close();  // from any thread: posted onto the strand

  // Used by the exchange (on the strand); `id` names the request the call belongs to, so a
  // stale exchange (its request done) is a no-op.
  bool exchange_open(uint64_t id) const;
  void respond(uint64_t id, int status, std::string content_type, std::string body,
               std::vector<std::pair<std::string, std::string>> extra);
  void begin_stream(uint64_t id, std::string content_type);
  void write_chunk(uint64_t id, std::string data);
  void end_stream(uint64_t id);
  void set_disconnect_callback(uint64_t id, std::function<void()> fn);
  void post(std::function<void()> fn);

 private:
  enum class Timer { Off, Idle, Receiving, Writing };

  void do_read();
  void on_read(beast::error_code ec, size_t n);
  void parse_buffered();
  void dispatch();
  void transport_error(int status, const std::string& message);
  void queue_bytes(std::string bytes);
  void flush();
  void on_write(beast::error_code ec);
  void answer_finished();
  void arm(Timer what);
  void on_deadline();
  void fail();  // the connection is unusable: close, and tell the exchange
  void new_parser();
  std::string head(int status, const std::string& content_type, const std::string& length_or_te,
                   const std::vector<std::pair<std::string, std::string>>& extra) const;

  tcp::socket socket_;
  std::shared_ptr<HttpShared> shared_;
  asio::steady_timer deadline_;
  // Reads land in read_chunk_ and are appended to buffer_ on completion: the parser consumes
  // buffer_ while a read is pending (pipelined bytes parsed when an answer ends), and a
  // flat_buffer that is consumed to empty rewinds, so a read into buffer_.prepare() would land
  // past the bytes it later commits (the lost keep-alive answer).
  std::array<char, 16 * 1024> read_chunk_{};
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;

  bool reading_ = false, closed_ = false;
  bool receiving_ = false;        // bytes of the next request arrived
  bool continue_sent_ = false;    // "100 Continue" answered for this request
  bool in_flight_ = false;        // a request was dispatched and its answer is not finished
  bool answer_done_ = false;      // the last bytes of the answer are queued
  bool streaming_ = false, chunked_ = true, close_after_ = false;
  uint64_t exchange_id_ = 0;
  std::function<void()> on_disconnect_;

  std::deque<std::string> pending_;
  size_t pending_bytes_ = 0;
  std::vector<std::string> writing_;
  bool write_busy_ = false;
  Timer timer_ = Timer::Off;
  uint64_t timer_gen_ = 0;
};

}  // namespace strata::server
