// Errors and checks. Every failure that input (a file, a request, a flag) can cause throws
// strata::Error with a message that names the thing at fault; the command line prints it on one
// line and exits non-zero. STRATA_CHECK_* print both operands so a failure explains itself.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);
}  // namespace detail

}  // namespace strata

#define STRATA_CHECK(cond, ...)                                                                  \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      ::strata::detail::check_failed(                                                            \
          __FILE__, __LINE__, "check failed: " #cond " " __VA_OPT__(+fmt::format(__VA_ARGS__))); \
    }                                                                                            \
  } while (0)

#define STRATA_CHECK_OP_(a, b, op)                                                              \
  do {                                                                                          \
    const auto& strata_a_ = (a);                                                                \
    const auto& strata_b_ = (b);                                                                \
    if (!(strata_a_ op strata_b_)) {                                                            \
      ::strata::detail::check_failed(                                                           \
          __FILE__, __LINE__,                                                                   \
          fmt::format("check failed: {} {} {} ({} vs {})", #a, #op, #b, strata_a_, strata_b_)); \
    }                                                                                           \
  } while (0)

#define STRATA_CHECK_EQ(a, b) STRATA_CHECK_OP_(a, b, ==)
#define STRATA_CHECK_NE(a, b) STRATA_CHECK_OP_(a, b, !=)
#define STRATA_CHECK_LT(a, b) STRATA_CHECK_OP_(a, b, <)
#define STRATA_CHECK_LE(a, b) STRATA_CHECK_OP_(a, b, <=)
#define STRATA_CHECK_GT(a, b) STRATA_CHECK_OP_(a, b, >)
#define STRATA_CHECK_GE(a, b) STRATA_CHECK_OP_(a, b, >=)
