// Host conv1d_prefill / conv1d_update against a float64 causal depthwise convolution, with
// packed sequences of different lengths (some shorter than K-1), state slots in a pool,
// has_initial on and off; chunked prefill and decode against one-shot prefill.
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

struct ConvSetup {
  int64_t C, K, S;
  DType act;
  Tensor weight, bias, states;  // [C, K], [C], [S, K-1, C]
};

ConvSetup make_setup(int64_t C, int64_t K, int64_t S, DType act, std::mt19937_64& rng) {
  ConvSetup s{C,
              K,
              S,
              act,
              random_tensor({C, K}, act, rng, 0.5),
              random_tensor({C}, act, rng, 0.3),
              random_tensor({S, K - 1, C}, act, rng)};
  return s;
}

// f64 reference of one sequence: window = [initial (K-1 rows) or zeros] ++ x rows.
// Returns out [L, C] and the new state [K-1, C]; also the magnitude sum|terms| per output.
struct ConvRef {
  std::vector<double> out, mag, state;
};
ConvRef conv_reference(const ConvSetup& s, const std::vector<double>& init_state, bool has_initial,
                       const Tensor& x, int64_t row0, int64_t L) {
  const int64_t C = s.C, K = s.K;
  std::vector<double> win(static_cast<size_t>((K - 1 + L) * C), 0.0);
  if (has_initial) std::copy(init_state.begin(), init_state.end(), win.begin());
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = 0; c < C; ++c)
      win[(K - 1 + i) * C + c] = get(x, {row0 + i, c});
  ConvRef r;
  r.out.resize(static_cast<size_t>(L * C));
  r.mag.resize(static_cast<size_t>(L * C));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = 0; c < C; ++c) {
      double acc = get(s.bias, {c}), mag = std::fabs(acc);
      for (int64_t k = 0; k < K; ++k) {
        const double p = get(s.weight, {c, k}) * win[(i + k) * C + c];
        acc += p;
        mag += std::fabs(p);
      }
      r.out[i * C + c] = acc / (1.0 + std::exp(-acc));
      r.mag[i * C + c] = mag;
    }
  r.state.assign(win.end() - (K - 1) * C, win.end());
  return r;
}

std::vector<double> state_of(const Tensor& states, int64_t slot, int64_t K, int64_t C) {
  std::vector<double> v;
  for (int64_t k = 0; k + 1 < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      v.push_back(get(states, {slot, k, c}));
  return v;
}

// Band: f32 sum of K+1 terms (K+2 roundings), through silu (|silu'| <= 1.1), silu's own f32
// exp / add / divide (4 roundings of |out|), and the store in act (u_act of |out|).
double conv_tol(double out, double mag, DType act, int64_t K) {
  return 1.1 * f32_band(mag, K + 2) +
         (4 * std::ldexp(1.0, -24) + unit_roundoff(act)) * std::fabs(out);
}

struct PrefillCase {
  int64_t C, K, S;
  DType act;
  std::vector<int32_t> lens, slots, has_initial;
  bool in_place;
};

void run_prefill_case(const PrefillCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("C={} K={} act={} B={} in_place={}", c.C, c.K, dtype_name(c.act),
                           c.lens.size(), c.in_place));
  std::mt19937_64 rng(seed);
  ConvSetup s = make_setup(c.C, c.K, c.S, c.act, rng);
  std::vector<int32_t> cu{0};
  for (int32_t l : c.lens)
    cu.push_back(cu.back() + l);
  const int64_t T = cu.back();
  WideRows x = wide_rows(T, c.C, 6, 4, c.act);  // xBC is a row view of in_proj's output
  fill_normal(x.wide, rng);
  const Tensor x0 = clone(x.view), states0 = clone(s.states);
  WideRows out = wide_rows(T, c.C, 2, 1, c.act);

  ops::Conv1dPrefillArgs a;
  a.x = x.view;
  a.weight = s.weight;
  a.bias = s.bias;
  a.conv_states = s.states;
  a.cu_seqlens = i32_tensor(cu);
  a.slots = i32_tensor(c.slots);
  a.has_initial = i32_tensor(c.has_initial);
  a.out = c.in_place ? x.view : out.view;
  OpContext ctx;
  ops::run(ctx, a);

  Comparison cmp, cmp_state;
  std::vector<bool> slot_used(static_cast<size_t>(c.S), false);
  for (size_t b = 0; b < c.lens.size(); ++b) {
    const int64_t slot = c.slots[b];
    slot_used[static_cast<size_t>(slot)] = true;
    const ConvRef r = conv_reference(s, state_of(states0, slot, c.K, c.C), c.has_initial[b] != 0,
                                     x0, cu[b], c.lens[b]);
    for (int64_t i = 0; i < c.lens[b]; ++i)
      for (int64_t ch = 0; ch < c.C; ++ch)
        cmp.check(get(a.out, {cu[b] + i, ch}), r.out[i * c.C + ch],
                  conv_tol(r.out[i * c.C + ch], r.mag[i * c.C + ch], c.act, c.K),
                  fmt::format("seq {} out[{}, {}]", b, i, ch));
    // The state holds raw inputs (or old state rows): exact copies.
    const std::vector<double> got = state_of(s.states, slot, c.K, c.C);
    for (size_t j = 0; j < got.size(); ++j)
      cmp_state.check(got[j], r.state[j], 0.0, fmt::format("seq {} state[{}]", b, j));
  }
  // Slots of no sequence keep their contents.
  for (int64_t slot = 0; slot < c.S; ++slot)
    if (!slot_used[static_cast<size_t>(slot)]) {
      const std::vector<double> got = state_of(s.states, slot, c.K, c.C),
                                want = state_of(states0, slot, c.K, c.C);
      for (size_t j = 0; j < got.size(); ++j)
        cmp_state.check(got[j], want[j], 0.0, fmt::format("idle slot {} [{}]", slot, j));
    }
  EXPECT_EQ(cmp.compared, T * c.C);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(cmp_state.compared, c.S * (c.K - 1) * c.C);
  EXPECT_EQ(cmp_state.failed, 0);
  if (!c.in_place) {
    EXPECT_EQ(out.touched_guards(), 0);
  }
}

TEST(HostConv1dPrefill, MatchesFloat64WithStatesAndShortSequences) {
  const PrefillCase cases[] = {
      // lengths 1 and 2 are shorter than K-1 = 3: the new state mixes old rows and new rows.
      {5, 4, 6, DType::F32, {1, 2, 3, 7}, {4, 0, 5, 2}, {1, 1, 0, 1}, false},
      {5, 4, 6, DType::F32, {2, 1}, {1, 3}, {0, 0}, false},
      {130, 4, 3, DType::BF16, {5, 0, 9}, {2, 0, 1}, {1, 1, 0}, false},  // 3 channel blocks, an
                                                                         // empty sequence
      {3, 2, 2, DType::BF16, {4, 1}, {1, 0}, {1, 1}, true},              // out aliases x
      {70, 4, 2, DType::F32, {33}, {1}, {1}, true},
  };
  uint64_t seed = 40;
  for (const auto& c : cases)
    run_prefill_case(c, seed++);
}

// Runs conv1d_prefill on rows [r0, r0 + L) of x for one sequence in `slot`.
void prefill_piece(ConvSetup& s, const Tensor& x, int64_t r0, int64_t L, int32_t slot,
                   bool has_initial, const Tensor& out) {
  ops::Conv1dPrefillArgs a;
  a.x = x.slice(0, r0, L);
  a.weight = s.weight;
  a.bias = s.bias;
  a.conv_states = s.states;
  a.cu_seqlens = i32_tensor({0, static_cast<int32_t>(L)});
  a.slots = i32_tensor({slot});
  a.has_initial = i32_tensor({has_initial ? 1 : 0});
  a.out = out.slice(0, r0, L);
  OpContext ctx;
  ops::run(ctx, a);
}

// A prompt prefilled in two pieces (state carried through conv_states) must give the same
// bits as the prompt prefilled at once: every output reads the same window values and sums
// them in the same order. Split points before and after K-1 tokens.
TEST(HostConv1dPrefill, TwoPiecesEqualOnePiece) {
  for (DType act : {DType::F32, DType::BF16}) {
    for (int64_t split : {1, 2, 3, 4, 9}) {
      SCOPED_TRACE(fmt::format("act={} split={}", dtype_name(act), split));
      std::mt19937_64 rng(50 + static_cast<uint64_t>(split));
      const int64_t C = 67, K = 4, L = 12;
      ConvSetup whole = make_setup(C, K, 2, act, rng);
      ConvSetup pieces{C, K, 2, act, whole.weight, whole.bias, clone(whole.states)};
      Tensor x = random_tensor({L, C}, act, rng);
      Tensor out_whole = Tensor::empty({L, C}, act), out_pieces = Tensor::empty({L, C}, act);
      poison(out_whole);
      poison(out_pieces);
      prefill_piece(whole, x, 0, L, 1, false, out_whole);
      prefill_piece(pieces, x, 0, split, 1, false, out_pieces);
      prefill_piece(pieces, x, split, L - split, 1, true, out_pieces);
      Comparison cmp;
      for (int64_t t = 0; t < L; ++t)
        for (int64_t ch = 0; ch < C; ++ch)
          cmp.check(get(out_pieces, {t, ch}), get(out_whole, {t, ch}), 0.0,
                    fmt::format("out[{}, {}]", t, ch));
      for (int64_t k = 0; k < K - 1; ++k)
        for (int64_t ch = 0; ch < C; ++ch)
          cmp.check(get(pieces.states, {1, k, ch}), get(whole.states, {1, k, ch}), 0.0,
                    fmt::format("state[{}, {}]", k, ch));
      EXPECT_EQ(cmp.compared, L * C + (K - 1) * C);
      EXPECT_EQ(cmp.failed, 0);
    }
  }
}

// Decode: a prefix prefilled, then conv1d_update one token at a time for two sequences in
// one batch, must equal the one-shot prefill bit for bit (same window, same order).
TEST(HostConv1dUpdate, RepeatedUpdatesEqualPrefill) {
  for (DType act : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(act));
    std::mt19937_64 rng(60);
    const int64_t C = 80, K = 4, L = 9, prefix = 2, S = 3;
    ConvSetup ref = make_setup(C, K, S, act, rng);
    ConvSetup dec{C, K, S, act, ref.weight, ref.bias, clone(ref.states)};
    const int32_t slots[2] = {2, 0};
    Tensor x[2] = {random_tensor({L, C}, act, rng), random_tensor({L, C}, act, rng)};
    Tensor out_ref[2], out_dec[2];
    for (int i = 0; i < 2; ++i) {
      out_ref[i] = Tensor::empty({L, C}, act);
      out_dec[i] = Tensor::empty({L, C}, act);
      poison(out_ref[i]);
      poison(out_dec[i]);
      prefill_piece(ref, x[i], 0, L, slots[i], true, out_ref[i]);
      prefill_piece(dec, x[i], 0, prefix, slots[i], true, out_dec[i]);
    }
    for (int64_t t = prefix; t < L; ++t) {
      Tensor xb = Tensor::empty({2, C}, act), ob = Tensor::empty({2, C}, act);
      poison(ob);
      for (int i = 0; i < 2; ++i)
        xb.select(i).copy_from(x[i].select(t));
      ops::Conv1dUpdateArgs a;
      a.x = xb;
      a.weight = dec.weight;
      a.bias = dec.bias;
      a.conv_states = dec.states;
      a.slots = i32_tensor({slots[0], slots[1]});
      a.out = ob;
      OpContext ctx;
      ops::run(ctx, a);
      for (int i = 0; i < 2; ++i)
        out_dec[i].select(t).copy_from(ob.select(i));
    }
    Comparison cmp;
    for (int i = 0; i < 2; ++i)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t ch = 0; ch < C; ++ch)
          cmp.check(get(out_dec[i], {t, ch}), get(out_ref[i], {t, ch}), 0.0,
                    fmt::format("seq {} out[{}, {}]", i, t, ch));
    for (int64_t slot = 0; slot < S; ++slot)
      for (int64_t k = 0; k < K - 1; ++k)
        for (int64_t ch = 0; ch < C; ++ch)
          cmp.check(get(dec.states, {slot, k, ch}), get(ref.states, {slot, k, ch}), 0.0,
                    fmt::format("state {} [{}, {}]", slot, k, ch));
    EXPECT_EQ(cmp.compared, 2 * L * C + S * (K - 1) * C);
    EXPECT_EQ(cmp.failed, 0);
  }
}

// conv1d_update against float64 directly (one step from a random state).
TEST(HostConv1dUpdate, MatchesFloat64) {
  std::mt19937_64 rng(70);
  const int64_t C = 9, K = 4, S = 4, B = 3;
  ConvSetup s = make_setup(C, K, S, DType::BF16, rng);
  const Tensor states0 = clone(s.states);
  WideRows x = wide_rows(B, C, 3, 3, DType::BF16);
  fill_normal(x.wide, rng);
  WideRows out = wide_rows(B, C, 1, 1, DType::BF16);
  const std::vector<int32_t> slots = {3, 1, 0};
  ops::Conv1dUpdateArgs a;
  a.x = x.view;
  a.weight = s.weight;
  a.bias = s.bias;
  a.conv_states = s.states;
  a.slots = i32_tensor(slots);
  a.out = out.view;
  OpContext ctx;
  ops::run(ctx, a);
  Comparison cmp;
  for (int64_t b = 0; b < B; ++b) {
    const ConvRef r = conv_reference(s, state_of(states0, slots[b], K, C), true, x.view, b, 1);
    for (int64_t ch = 0; ch < C; ++ch)
      cmp.check(get(out.view, {b, ch}), r.out[ch], conv_tol(r.out[ch], r.mag[ch], DType::BF16, K),
                fmt::format("out[{}, {}]", b, ch));
    const std::vector<double> got = state_of(s.states, slots[b], K, C);
    for (size_t j = 0; j < got.size(); ++j)
      cmp.check(got[j], r.state[j], 0.0, fmt::format("state {} [{}]", b, j));
  }
  EXPECT_EQ(cmp.compared, B * C + B * (K - 1) * C);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(out.touched_guards(), 0);
}

TEST(HostConv1dPrefill, BadIndicesFailWithMessages) {
  std::mt19937_64 rng(80);
  ConvSetup s = make_setup(4, 4, 2, DType::F32, rng);
  ops::Conv1dPrefillArgs a;
  a.x = random_tensor({3, 4}, DType::F32, rng);
  a.weight = s.weight;
  a.bias = s.bias;
  a.conv_states = s.states;
  a.out = Tensor::empty({3, 4}, DType::F32);
  OpContext ctx;
  auto expect_error = [&](const std::vector<int32_t>& cu, const std::vector<int32_t>& slots,
                          const std::vector<int32_t>& init, const char* needle) {
    a.cu_seqlens = i32_tensor(cu);
    a.slots = i32_tensor(slots);
    a.has_initial = i32_tensor(init);
    try {
      ops::run(ctx, a);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({0, 1, 3}, {0, 0}, {0, 0}, "slot 0 is used by two sequences");
  expect_error({0, 1, 3}, {0, 2}, {0, 0}, "slots[1] = 2");
  expect_error({0, 2, 1}, {0, 1}, {0, 0}, "cu_seqlens decreases");
  expect_error({0, 1, 2}, {0, 1}, {0, 0}, "ends at 2");
  expect_error({0, 1, 3}, {0, 1}, {0, 2}, "has_initial[1] = 2");
}

}  // namespace
}  // namespace strata::reftest
