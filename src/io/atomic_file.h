// The one writer for every file strata writes (.npy, --json reports, safetensors shards,
// checkpoint indexes). Data goes to a temporary file created exclusively (O_EXCL | O_NOFOLLOW)
// in the target's directory, is flushed to disk (fsync) and checked, then renamed over the
// target. The target must be absent or a regular file: a symlink, FIFO, device node or
// directory there is refused, never replaced. Any write, flush, close or rename error
// (ENOSPC, EFBIG, EIO...) throws strata::Error naming the target and leaves no partial file:
// the temporary file is removed and the target keeps its old contents.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::io {

class AtomicFile {
 public:
  // Checks the target and creates the temporary file; throws when either is not possible.
  explicit AtomicFile(std::string target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // fsync, close, check that the target is still absent or regular, rename into place.
  void commit();

  const std::string& target() const { return target_; }

 private:
  std::string target_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFile for one string.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Flushes stdout and std::cout and checks both for a write error; throws strata::Error naming
// standard output (a full disk, a closed pipe, /dev/full). Commands call it before returning.
void check_stdout();

// Writes streamed text to stdout (flushed, checked like check_stdout) and remembers whether it
// ended a line, so that an error after it still starts a line of its own.
void write_stdout(std::string_view text);
// True when write_stdout left a line open (the last byte it wrote was not '\n').
bool stdout_line_open();

}  // namespace strata::io
