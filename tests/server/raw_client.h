// A blocking TCP client for the server tests: raw bytes out (malformed requests, slow senders,
// truncated bodies), raw bytes in, with timeouts. POSIX sockets, no HTTP library: the tests
// must be able to send what no library would.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace strata::server::testing {

class RawClient {
 public:
  RawClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  // False when the peer closed or the send failed.
  bool send(const std::string& bytes);
  // Reads until the peer closes or the timeout; returns what arrived.
  std::string read_all();
  // Reads one HTTP response (head + Content-Length body, or chunked up to the last chunk).
  // Empty when the connection closed first. `body` gets the de-chunked body.
  std::string read_response(std::string* body = nullptr);
  // Reads until `needle` was seen (true) or close / timeout (false).
  bool read_until(const std::string& needle);
  // True if the peer closed the connection (a read returns 0) within the timeout.
  bool closed_by_peer();
  void close();
  // Abortive close (RST): what a killed client looks like.
  void reset();
  const std::string& received() const { return buf_; }

 private:
  bool fill();  // one recv into buf_; false on close / timeout
  int fd_ = -1;
  std::string buf_;
  std::chrono::milliseconds timeout_;
};

// Status code of a response head ("HTTP/1.1 404 ..."), or -1.
int status_of(const std::string& response);
// A complete request with Content-Length.
std::string http_request(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& extra_headers = "");

}  // namespace strata::server::testing
