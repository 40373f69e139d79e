#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

#include "core/check.h"

namespace strata::io {

namespace {

std::string_view kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The target may be absent or a regular file (lstat: a symlink is refused, not followed).
void check_replaceable(const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail("{}: cannot write here: {}", target, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    fail("{}: refusing to replace {} with a file; remove it or choose another path", target,
         kind_of(st.st_mode));
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:012x}", rng() & 0xffffffffffffull);
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  if (target_.empty()) fail("an output path is empty");
  check_replaceable(target_);
  const std::filesystem::path p(target_);
  const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  const std::string base = p.filename().string();
  if (base.empty() || base == "." || base == "..") fail("{}: not a file name", target_);
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    // Hidden, unique and in the same directory, so the rename cannot cross file systems.
    tmp_ = (dir / ("." + base + "." + random_suffix() + ".tmp")).string();
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST)
      fail("{}: cannot create a temporary file in {}: {}", target_, dir.string(),
           std::strerror(errno));
  }
  if (fd_ < 0) fail("{}: cannot create a unique temporary file in {}", target_, dir.string());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) fail("{}: write after the file was closed", target_);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", target_, std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("{}: commit after the file was closed", target_);
  if (::fsync(fd_) != 0) fail("{}: flushing to disk failed: {}", target_, std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("{}: close failed: {}", target_, std::strerror(errno));
  check_replaceable(target_);  // something may have appeared there meanwhile
  if (::rename(tmp_.c_str(), target_.c_str()) != 0)
    fail("{}: cannot rename the temporary file into place: {}", target_, std::strerror(errno));
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void check_stdout() {
  // With stdio sync (the default) flushing std::cout flushes stdout: keep the first errno.
  errno = 0;
  std::cout.flush();
  int err = errno;
  const bool cout_bad = !std::cout.good();
  errno = 0;
  const bool c_bad = std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!err) err = errno;
  if (cout_bad || c_bad) {
    std::cout.clear();
    std::clearerr(stdout);
    fail("writing to standard output failed{}{}", err ? ": " : "", err ? std::strerror(err) : "");
  }
}

namespace {
bool g_line_open = false;
}

void write_stdout(std::string_view text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  g_line_open = text.back() != '\n';
  check_stdout();
}

bool stdout_line_open() {
  return g_line_open;
}

}  // namespace strata::io
