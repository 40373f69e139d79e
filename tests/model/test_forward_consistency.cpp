// Self-consistency of the forward on a tiny random f32 checkpoint with every layer kind:
// a prompt prefilled at once, prefilled in chunks (each continuing from the cached conv, SSM
// and KV state), and prefilled partly then decoded token by token must give the same logits;
// sequences batched into one step must give what each gives alone.
//
// Tolerance (f32): the paths differ only in how sums are associated (SSD chunk boundaries move
// with the split, state passing replaces intra-chunk sums; decode uses the sequential update).
// Each such sum of n <= ~100 terms carries a relative error of at most ~n * 2^-24 ~ 6e-6, and
// the normalized residual stack does not amplify it much over 9 layers; 2e-5 relative L2 per
// logits row leaves room for that while a wrong state carry (an O(1) change) fails by orders
// of magnitude.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "model_test_util.h"

namespace strata::model {
namespace {

using testing::rel_l2;
using testing::Runner;
using testing::TestSeq;

constexpr double kF32RowTol = 2e-5;

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t from, size_t len) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from),
          v.begin() + static_cast<std::ptrdiff_t>(from + len)};
}

// Logits of every position of `prompt`, prefilled in pieces of the given lengths.
std::vector<std::vector<float>> prefill_in_pieces(NemotronHModel& m,
                                                  const std::vector<int32_t>& prompt,
                                                  const std::vector<size_t>& pieces) {
  Runner r(m, 1, static_cast<int64_t>(prompt.size()));
  TestSeq s = r.start();
  std::vector<std::vector<float>> out;
  size_t done = 0;
  for (size_t len : pieces) {
    auto rows = r.step({&s}, {slice(prompt, done, len)}, LogitRows::All);
    EXPECT_EQ(rows.size(), len);
    out.insert(out.end(), rows.begin(), rows.end());
    done += len;
  }
  EXPECT_EQ(done, prompt.size());
  return out;
}

void expect_rows_close(const std::vector<std::vector<float>>& got,
                       const std::vector<std::vector<float>>& want, double tol,
                       const std::string& what, int* compared) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = rel_l2(got[i], want[i]);
    worst = std::max(worst, e);
    EXPECT_LE(e, tol) << what << ": row " << i;
    *compared += static_cast<int>(got[i].size());
  }
  ::testing::Test::RecordProperty(what, fmt::format("{:.3g}", worst));
}

class WholeVersusChunked : public ::testing::TestWithParam<std::string> {};

// Every layer kind; and Mamba + MLP only (no attention: no KV cache, no block tables).
INSTANTIATE_TEST_SUITE_P(Patterns, WholeVersusChunked, ::testing::Values("M*-EM*E-M", "M-MM-"),
                         [](const auto& info) {
                           return info.index == 0 ? std::string("hybrid")
                                                  : std::string("mamba_mlp");
                         });

TEST_P(WholeVersusChunked, SameLogits) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::F32, GetParam());
  auto model = testing::synthetic_model(c, 21);
  const std::vector<int32_t> prompt = testing::random_ids(13, c.vocab_size, 5);
  const auto whole = prefill_in_pieces(*model, prompt, {13});
  int compared = 0;
  // Splits across SSD chunk boundaries (chunk_size 4), inside them, and first pieces shorter
  // than the conv window (K-1 = 3), so the conv state mixes old state and new rows.
  for (const auto& pieces :
       std::vector<std::vector<size_t>>{{5, 4, 4}, {1, 2, 10}, {3, 7, 3}, {4, 4, 4, 1}, {12, 1}}) {
    std::string name = "chunked";
    for (size_t p : pieces)
      name += "_" + std::to_string(p);
    expect_rows_close(prefill_in_pieces(*model, prompt, pieces), whole, kF32RowTol, name,
                      &compared);
  }

  // Prefill 5 tokens, then decode the other 8 one by one (the decode kernels).
  Runner r(*model, 1, 13);
  TestSeq s = r.start();
  std::vector<std::vector<float>> decoded = r.step({&s}, {slice(prompt, 0, 5)}, LogitRows::All);
  for (size_t i = 5; i < prompt.size(); ++i) {
    auto row = r.step({&s}, {{prompt[i]}}, LogitRows::LastPerSequence, /*expect_decode=*/1);
    ASSERT_EQ(row.size(), 1u);
    decoded.push_back(row[0]);
  }
  expect_rows_close(decoded, whole, kF32RowTol, "prefill5_decode8", &compared);
  EXPECT_EQ(compared, 6 * 13 * c.vocab_size);

  // The logits are not degenerate: rows differ between positions.
  EXPECT_GT(rel_l2(whole[3], whole[4]), 1e-2);
}

TEST(ForwardConsistency, BatchedSequencesEqualEachAlone) {
  const ModelConfig c = testing::tiny_hybrid_config();
  auto model = testing::synthetic_model(c, 33);
  const std::vector<std::vector<int32_t>> prompts = {testing::random_ids(9, c.vocab_size, 1),
                                                     testing::random_ids(6, c.vocab_size, 2),
                                                     testing::random_ids(1, c.vocab_size, 3)};
  const std::vector<int32_t> next = {7, 11, 13};
  // Third step: 1, 2 and 3 more tokens, so it mixes a q_len-1 continuation with chunks.
  const std::vector<std::vector<int32_t>> more = {{17}, {19, 23}, {29, 31, 37}};

  // Each sequence alone: prefill, one decode step, one more chunk.
  std::vector<std::vector<std::vector<float>>> alone_prefill, alone_decode, alone_more;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Runner r(*model, 1, 16);
    TestSeq s = r.start();
    alone_prefill.push_back(r.step({&s}, {prompts[i]}, LogitRows::All, 0));
    alone_decode.push_back(r.step({&s}, {{next[i]}}, LogitRows::LastPerSequence, 1));
    alone_more.push_back(r.step({&s}, {more[i]}, LogitRows::All, more[i].size() == 1 ? 1 : 0));
  }

  // All three in one runner: different slots, interleaved blocks, one step each time.
  Runner r(*model, 3, 16);
  TestSeq a = r.start(), b = r.start(), d = r.start();
  const std::vector<TestSeq*> all = {&a, &b, &d};
  const auto pre = r.step(all, prompts, LogitRows::All, 0);
  const auto dec = r.step(all, {{next[0]}, {next[1]}, {next[2]}}, LogitRows::LastPerSequence, 1);
  const auto mix = r.step(all, more, LogitRows::All, 0);  // q_len 1 with state goes through prefill
  ASSERT_EQ(pre.size(), 16u);
  ASSERT_EQ(dec.size(), 3u);
  ASSERT_EQ(mix.size(), 6u);
  int compared = 0;
  size_t row_pre = 0, row_mix = 0;
  for (size_t i = 0; i < 3; ++i) {
    const auto take = [](const std::vector<std::vector<float>>& v, size_t from, size_t n) {
      return std::vector<std::vector<float>>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                             v.begin() + static_cast<std::ptrdiff_t>(from + n));
    };
    const std::string tag = std::to_string(i);
    expect_rows_close(take(pre, row_pre, prompts[i].size()), alone_prefill[i], kF32RowTol,
                      "batched_prefill_" + tag, &compared);
    expect_rows_close(take(dec, i, 1), alone_decode[i], kF32RowTol, "batched_decode_" + tag,
                      &compared);
    expect_rows_close(take(mix, row_mix, more[i].size()), alone_more[i], kF32RowTol,
                      "batched_mixed_" + tag, &compared);
    row_pre += prompts[i].size();
    row_mix += more[i].size();
  }
  EXPECT_EQ(compared, (16 + 3 + 6) * c.vocab_size);

  // LastPerSequence (the gather before norm_f) picks each sequence's last row of All.
  Runner r2(*model, 3, 16);
  TestSeq a2 = r2.start(), b2 = r2.start(), d2 = r2.start();
  const auto last = r2.step({&a2, &b2, &d2}, prompts, LogitRows::LastPerSequence);
  ASSERT_EQ(last.size(), 3u);
  int compared_last = 0;
  expect_rows_close({last[0], last[1], last[2]}, {pre[8], pre[14], pre[15]}, kF32RowTol,
                    "last_rows", &compared_last);
  EXPECT_EQ(compared_last, 3 * c.vocab_size);
}

}  // namespace
}  // namespace strata::model
