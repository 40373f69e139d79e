#include "core/check.h"

namespace strata::detail {

void check_failed(const char* file, int line, const std::string& what) {
  // Internal invariants and input validation share one path: the message carries the site.
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  throw Error(fmt::format("{} ({}:{})", what, base, line));
}

}  // namespace strata::detail
