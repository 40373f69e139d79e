#include "flag_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

namespace strata::cli {

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
          return fmt::format("\"{}\" is not an integer in [{}, {}]", s, lo, hi);
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator float_range(double lo, double hi, bool lo_open) {
  return CLI::Validator(
      [lo, hi, lo_open](std::string& s) -> std::string {
        const std::string range = fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi);
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) ||
            (lo_open ? v <= lo : v < lo) || v > hi)
          return fmt::format("\"{}\" is not a finite number in {}", s, range);
        return {};
      },
      fmt::format("FLOAT in {}{}, {}]", lo_open ? "(" : "[", lo, hi));
}

}  // namespace strata::cli
