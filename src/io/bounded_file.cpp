#include "io/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "io/json_strict.h"

namespace strata::io {

namespace {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Reads at most max_bytes + 1 bytes from fd into out; returns false on a read error (errno set).
bool read_bounded(int fd, uint64_t max_bytes, std::string& out) {
  char buf[65536];
  while (out.size() <= max_bytes) {
    const size_t want = std::min<uint64_t>(sizeof buf, max_bytes + 1 - out.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string format_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return v == static_cast<double>(static_cast<uint64_t>(v))
             ? fmt::format("{:.0f} {}", v, kUnits[u])
             : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string read_regular_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) fail("{}: cannot open the {}: {}", path, what, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat the {}: {}", path, what, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail("{}: the {} must be a regular file; this is {}", path, what, file_kind(st.st_mode));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    fail("{}: the {} is {}, larger than the {} limit for it", path, what,
         format_bytes(static_cast<uint64_t>(st.st_size)), format_bytes(max_bytes));
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  if (!read_bounded(f.fd, max_bytes, text))
    fail("{}: read error in the {}: {}", path, what, std::strerror(errno));
  if (text.size() > max_bytes)  // the file grew while it was read
    fail("{}: the {} is larger than the {} limit for it", path, what, format_bytes(max_bytes));
  return text;
}

std::string read_stdin_text(std::string_view what, uint64_t max_bytes) {
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0)
    fail("standard input ({}): cannot stat: {}", what, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("standard input ({}) is a directory, not text", what);
  std::string text;
  if (!read_bounded(STDIN_FILENO, max_bytes, text))
    fail("standard input ({}): read error: {}", what, std::strerror(errno));
  if (text.size() > max_bytes)
    fail("standard input ({}) is larger than the {} limit", what, format_bytes(max_bytes));
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    fail("standard input ({}) is not text: a NUL byte at offset {}", what, nul);
  if (const size_t bad = first_invalid_utf8(text); bad != std::string::npos)
    fail("standard input ({}) is not valid UTF-8 (byte {} of {})", what, bad, text.size());
  return text;
}

}  // namespace strata::io
