// Range checks for numeric flags: an out-of-range value is refused by the parser with the flag's
// name and the range ("--max-tokens: 0 is outside [1, 1048576]"), before any work starts.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace strata::cli {

// Longest context a command line asks for: prompt + --max-tokens, a calibration length. Far
// above any released model's max_position_embeddings (Nemotron-H: 1M), far below int64 sums.
inline constexpr int64_t kMaxFlagTokens = int64_t{1} << 24;

// Integers in [lo, hi].
CLI::Validator int_range(int64_t lo, int64_t hi);
// Finite floats in [lo, hi] (or (lo, hi] with lo_open); NaN and inf are refused.
CLI::Validator float_range(double lo, double hi, bool lo_open = false);

}  // namespace strata::cli
