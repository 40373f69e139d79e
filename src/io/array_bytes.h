// Overflow-checked byte size of a C-ordered array, shared by the file parsers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace strata::io {

// dims (each >= 0) x elem_size in bytes, or nullopt when the product of the NON-ZERO dims times
// elem_size exceeds INT64_MAX. Bounding the non-zero dims, not just the total (which one zero
// makes 0), keeps every partial product inside int64: numel in any order and every row-major
// stride, as Shape and Tensor compute them ([0, 2^40, 2^40] has 0 bytes but strides of 2^80).
inline std::optional<uint64_t> checked_array_bytes(const std::vector<int64_t>& dims,
                                                   size_t elem_size) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t nonzero = elem_size;
  bool any_zero = false;
  for (const int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      any_zero = true;
      continue;
    }
    const auto ud = static_cast<uint64_t>(d);
    if (nonzero > kMax / ud) return std::nullopt;
    nonzero *= ud;
  }
  return any_zero ? 0 : nonzero;
}

}  // namespace strata::io
