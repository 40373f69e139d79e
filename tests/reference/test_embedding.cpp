// Host embedding gather against direct reads of the table.
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

void run_embedding_case(int64_t V, int64_t H, int64_t T, DType table_dtype, DType out_dtype,
                        uint64_t seed) {
  SCOPED_TRACE(fmt::format("V={} H={} T={} {} -> {}", V, H, T, dtype_name(table_dtype),
                           dtype_name(out_dtype)));
  std::mt19937_64 rng(seed);
  Tensor table = random_tensor({V, H}, table_dtype, rng);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  for (auto& id : ids)
    id = pick(rng);
  WideRows out = wide_rows(T, H, 3, 2, out_dtype);

  ops::EmbeddingArgs a;
  a.table = table;
  a.ids = i32_tensor(ids);
  a.out = out.view;
  OpContext ctx;
  ops::run(ctx, a);

  // Same dtype: an exact copy. Converting: one rounding to out's dtype.
  Comparison cmp;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const double want = get(table, {ids[static_cast<size_t>(t)], h});
      cmp.check(get(out.view, {t, h}), want,
                unit_roundoff(out_dtype) * std::fabs(want) * (table_dtype != out_dtype),
                fmt::format("out[{}, {}]", t, h));
    }
  EXPECT_EQ(cmp.compared, T * H);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(out.touched_guards(), 0);
}

TEST(HostEmbedding, GathersRows) {
  run_embedding_case(11, 16, 7, DType::BF16, DType::BF16, 1);
  run_embedding_case(5, 3, 9, DType::F32, DType::F32, 2);
  run_embedding_case(7, 33, 4, DType::BF16, DType::F32, 3);
  run_embedding_case(7, 33, 4, DType::F32, DType::BF16, 4);
  run_embedding_case(1, 1, 1, DType::F32, DType::F32, 5);
}

TEST(HostEmbedding, OutOfRangeIdFailsNamingIt) {
  std::mt19937_64 rng(6);
  ops::EmbeddingArgs a;
  a.table = random_tensor({4, 8}, DType::F32, rng);
  a.ids = i32_tensor({0, 4});
  a.out = Tensor::empty({2, 8}, DType::F32);
  OpContext ctx;
  try {
    ops::run(ctx, a);
    FAIL() << "id 4 of a 4-row table accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ids[1] = 4"), std::string::npos) << e.what();
  }
  a.ids = i32_tensor({-1});
  a.out = Tensor::empty({1, 8}, DType::F32);
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
