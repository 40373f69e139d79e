#include "raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace strata::server::testing {

RawClient::RawClient(uint16_t port, std::chrono::milliseconds timeout) : timeout_(timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawClient::~RawClient() { close(); }

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RawClient::reset() {
  if (fd_ < 0) return;
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close();
}

bool RawClient::send(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool RawClient::fill() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout_.count())) <= 0) return false;
  char tmp[65536];
  ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

std::string RawClient::read_all() {
  while (fill()) {
  }
  return buf_;
}

bool RawClient::read_until(const std::string& needle) {
  while (buf_.find(needle) == std::string::npos)
    if (!fill()) return false;
  return true;
}

bool RawClient::closed_by_peer() {
  if (fd_ < 0) return true;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_.count())) <= 0) return false;
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return true;
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

namespace {

// Case-insensitive search for a header value in a response head.
std::string header_value(const std::string& head, const std::string& lower_name) {
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t at = lower.find("\r\n" + lower_name + ":");
  if (at == std::string::npos) return "";
  size_t start = at + 3 + lower_name.size();
  size_t end = head.find("\r\n", start);
  std::string v = head.substr(start, end - start);
  while (!v.empty() && v.front() == ' ') v.erase(v.begin());
  return v;
}

}  // namespace

std::string RawClient::read_response(std::string* body) {
  if (!read_until("\r\n\r\n")) return "";
  size_t head_end = buf_.find("\r\n\r\n") + 4;
  std::string head = buf_.substr(0, head_end);
  // 1xx interim answers are not the response.
  if (status_of(head) >= 100 && status_of(head) < 200) {
    buf_.erase(0, head_end);
    return read_response(body);
  }
  std::string out;
  const std::string te = header_value(head, "transfer-encoding");
  if (te.find("chunked") != std::string::npos) {
    size_t pos = head_end;
    for (;;) {
      while (buf_.find("\r\n", pos) == std::string::npos)
        if (!fill()) return "";
      size_t line_end = buf_.find("\r\n", pos);
      size_t size = std::stoul(buf_.substr(pos, line_end - pos), nullptr, 16);
      while (buf_.size() < line_end + 2 + size + 2)
        if (!fill()) return "";
      out += buf_.substr(line_end + 2, size);
      pos = line_end + 2 + size + 2;
      if (size == 0) break;
    }
    std::string whole = buf_.substr(0, pos);
    buf_.erase(0, pos);
    if (body) *body = out;
    return whole;
  }
  const std::string cl = header_value(head, "content-length");
  size_t length = cl.empty() ? 0 : std::stoul(cl);
  if (cl.empty() && header_value(head, "connection") == "close") {
    read_all();
    length = buf_.size() - head_end;
  }
  while (buf_.size() < head_end + length)
    if (!fill()) return "";
  if (body) *body = buf_.substr(head_end, length);
  std::string whole = buf_.substr(0, head_end + length);
  buf_.erase(0, head_end + length);
  return whole;
}

int status_of(const std::string& response) {
  if (response.compare(0, 5, "HTTP/") != 0) return -1;
  size_t sp = response.find(' ');
  if (sp == std::string::npos) return -1;
  return std::atoi(response.c_str() + sp + 1);
}

std::string http_request(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& extra_headers) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\n";
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

}  // namespace strata::server::testing
