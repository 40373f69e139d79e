#include "cases_util.h"

#include <algorithm>

namespace strata::opstest {

std::vector<int32_t> distinct(Rng& rng, int64_t k, int64_t n) {
  STRATA_CHECK_LE(k, n);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int64_t i = 0; i < k; ++i) {  // partial Fisher-Yates
    const int64_t j = i + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n - i));
    std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
  }
  all.resize(static_cast<size_t>(k));
  return all;
}

}  // namespace strata::opstest
