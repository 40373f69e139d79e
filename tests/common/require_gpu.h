// Skipping a GPU test where there is no GPU: STRATA_GPU_SKIP(why) skips loudly, except when the
// environment sets STRATA_REQUIRE_GPU=1 (scripts/gpu-check.sh does), where a missing GPU is a
// failure: a GPU check in which the GPU tests silently skipped must not pass.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace strata::test {

inline bool gpu_required() {
  const char* v = std::getenv("STRATA_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace strata::test

// Use in a test body or SetUp as a statement of its own, inside braces when it follows an `if`
// (it returns from the function, like GTEST_SKIP).
#define STRATA_GPU_SKIP(why)                                                       \
  if (::strata::test::gpu_required())                                              \
    GTEST_FAIL() << "STRATA_REQUIRE_GPU=1 but the GPU test cannot run: " << (why); \
  else                                                                             \
    GTEST_SKIP() << "SKIPPED: " << (why)
