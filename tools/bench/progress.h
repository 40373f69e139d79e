// A one-line progress bar on stderr for the benchmarks (only when stderr is a terminal, so logs
// and CI output stay clean): "[#####.....] 512/1024 requests 12.3 s".
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace strata::bench {

class ProgressBar {
 public:
  ProgressBar(int64_t total, std::string unit)
      : total_(total), unit_(std::move(unit)), on_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressBar() { finish(); }
  void update(int64_t done) {
    if (!on_ || total_ <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\r[%s] %lld/%lld %s %.1f s", bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), unit_.c_str(), s);
    std::fflush(stderr);
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fprintf(stderr, "\n");
    shown_ = false;
  }

 private:
  int64_t total_;
  std::string unit_;
  bool on_, shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

}  // namespace strata::bench
