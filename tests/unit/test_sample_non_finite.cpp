// Issue 12 part 4, host side: the host sample op never turns a non-finite logit row into a
// token: it refuses the row, or flags it when the caller takes flags (the engine).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/ops.h"

namespace strata {
namespace {

// logits: [2, 64] f32, row 1 carries `bad` at column 17. With `flags`, the op reports non-finite
// rows through its `nonfinite` output; without, it refuses. Returns the error, or "".
std::string sample_with(float bad, float temperature, std::vector<int32_t>* ids_out = nullptr,
                        std::vector<int32_t>* flags = nullptr) {
  constexpr int64_t V = 64;
  Tensor logits = Tensor::empty(Shape{2, V}, DType::F32, Device::Host);
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 2.f);
  for (int64_t i = 0; i < 2 * V; ++i)
    logits.data<float>()[i] = n(rng);
  logits.data<float>()[V + 17] = bad;
  ops::SampleArgs s;
  s.logits = logits;
  s.rows.assign(2, ops::SamplingRow{temperature, 0, 1.f, 5, 0});
  s.ids = Tensor::empty(Shape{2}, DType::I32, Device::Host);
  if (flags) s.nonfinite = Tensor::empty(Shape{2}, DType::I32, Device::Host);
  OpContext ctx;
  try {
    ops::run(ctx, s);
  } catch (const Error& e) {
    return e.what();
  }
  if (ids_out) ids_out->assign(s.ids.data<int32_t>(), s.ids.data<int32_t>() + 2);
  if (flags) flags->assign(s.nonfinite.data<int32_t>(), s.nonfinite.data<int32_t>() + 2);
  return "";
}

// Raw logits come from the model and are finite; NaN or an infinity anywhere in a row (a -inf
// too: masking goes through the op's bias entries, never through the logits) is refused, or,
// where the caller asks for flags (the engine), flagged with id -1 so the request fails naming
// the position.
TEST(SampleNonFinite, NaNAndInfinityNeverBecomeATokenOnTheHost) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  int refused = 0, flagged = 0;
  for (float t : {0.f, 0.7f}) {
    SCOPED_TRACE(t);
    for (float bad : {nan, inf, -inf}) {
      const std::string e = sample_with(bad, t);
      EXPECT_NE(e.find("logits row 1 holds a NaN or an infinity"), std::string::npos) << e;
      ++refused;
      std::vector<int32_t> ids, flags;
      EXPECT_EQ(sample_with(bad, t, &ids, &flags), "");
      ASSERT_EQ(ids.size(), 2u);
      EXPECT_EQ(flags[0], 0);
      EXPECT_GE(ids[0], 0);  // the finite row samples as usual
      EXPECT_LT(ids[0], 64);
      EXPECT_EQ(flags[1], 1);
      EXPECT_EQ(ids[1], -1);
      ++flagged;
    }
  }
  EXPECT_EQ(refused, 6);
  EXPECT_EQ(flagged, 6);
}

}  // namespace
}  // namespace strata
