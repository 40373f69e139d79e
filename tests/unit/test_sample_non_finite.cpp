// Issue 12 part 4, host side: the host sample op never turns a non-finite logit row into a
// token. NaN anywhere, or a row whose maximum is +inf or -inf, is an error naming the row; a row
// with some -inf entries (masked tokens) samples as usual.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/check.h"
#include "ops/ops.h"

namespace strata {
namespace {

// logits: [2, 64] f32, row 1 carries `bad` at column 17; returns the error, or "" and the ids.
std::string sample_with(float bad, float temperature, std::vector<int32_t>* ids_out = nullptr) {
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
  OpContext ctx;
  try {
    ops::run(ctx, s);
  } catch (const Error& e) {
    return e.what();
  }
  if (ids_out) ids_out->assign(s.ids.data<int32_t>(), s.ids.data<int32_t>() + 2);
  return "";
}

TEST(SampleNonFinite, NaNAndInfinityNeverBecomeATokenOnTheHost) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  int refused = 0;
  for (float t : {0.f, 0.7f}) {
    SCOPED_TRACE(t);
    const std::string e_nan = sample_with(nan, t);
    EXPECT_NE(e_nan.find("logits[1, 17] is NaN"), std::string::npos) << e_nan;
    const std::string e_inf = sample_with(inf, t);
    EXPECT_NE(e_inf.find("logits row 1 has no finite maximum"), std::string::npos) << e_inf;
    refused += 2;
    // A masked token (-inf) is fine and is never drawn.
    std::vector<int32_t> ids;
    EXPECT_EQ(sample_with(-inf, t, &ids), "");
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_NE(ids[1], 17);
    EXPECT_GE(ids[1], 0);
    EXPECT_LT(ids[1], 64);
  }
  EXPECT_EQ(refused, 4);
}

}  // namespace
}  // namespace strata
