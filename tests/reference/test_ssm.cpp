// Host ssm_scan (chunked SSD) and ssm_update against the sequential Mamba2 recurrence written
// here in float64:
//   dt = softplus(dt_raw + dt_bias); S = exp(dt A) S + dt x (x) B; y = S . C + D x
// over packed sequences with state slots, has_initial on and off, n_groups 1 and > 1, lengths
// around the chunk size; chunked prefill in two pieces and repeated decode steps against
// one-shot prefill.
//
// Band (first-order, f32 state and math): each output is a sum of decayed terms whose absolute
// values sum to ymag (the same recurrence run on |x|, |B|, |C|, |D x|). f32 rounds
//  - the dot products over N and the sums over a chunk's Q positions, and the state passing
//    once per chunk: (chunks + 1) * (2Q + 2N + 16) roundings of ymag;
//  - the cumulative decay sums cum (relative error ~ positions * 2^-24 of |cum|), which enter
//    exp(): 8 * cum_span * 2^-24 of ymag, cum_span = sum |dt A| over the sequence;
// and the output is stored in act once (u_act of |y|).
#include <gtest/gtest.h>

#include "reference_util.h"

namespace strata::reftest {
namespace {

struct SsmProblem {
  int64_t Hm, P, G, N, S;
  DType act;
  Tensor A, D, dt_bias;  // [Hm]: A f32 (= -exp(A_log)), D and dt_bias in `param` dtype
  Tensor states;         // [S, Hm, P, N] f32
};

SsmProblem make_problem(int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t S, DType act,
                        DType param, std::mt19937_64& rng) {
  SsmProblem p{Hm,
               P,
               G,
               N,
               S,
               act,
               Tensor::empty({Hm}, DType::F32),
               random_tensor({Hm}, param, rng),
               Tensor::empty({Hm}, param),
               random_tensor({S, Hm, P, N}, DType::F32, rng, 0.5)};
  std::uniform_real_distribution<double> u(-1.0, 0.5), bias(-3.0, -0.5);
  for (int64_t h = 0; h < Hm; ++h) {
    set(p.A, {h}, -std::exp(u(rng)));
    set(p.dt_bias, {h}, bias(rng));
  }
  return p;
}

// Token inputs laid out as in the mixer: x | B | C are column ranges of one wide xBC row
// (the conv output), dt_raw a column range of the in_proj output.
struct SsmTokens {
  WideRows xbc, dtw;
  Tensor x, B, C, dt_raw;
};

SsmTokens make_tokens(const SsmProblem& p, int64_t T, std::mt19937_64& rng) {
  SsmTokens t;
  const int64_t HP = p.Hm * p.P, GN = p.G * p.N;
  t.xbc = wide_rows(T, HP + 2 * GN, 3, 1, p.act);
  fill_normal(t.xbc.wide, rng);
  t.x = t.xbc.wide.slice(1, 1, HP);
  t.B = t.xbc.wide.slice(1, 1 + HP, GN);
  t.C = t.xbc.wide.slice(1, 1 + HP + GN, GN);
  t.dtw = wide_rows(T, p.Hm, 5, 2, p.act);
  fill_normal(t.dtw.wide, rng);
  t.dt_raw = t.dtw.view;
  return t;
}

struct SeqRef {
  std::vector<double> y, ymag;   // [L, Hm*P]
  std::vector<double> S, Smag;   // [Hm, P, N]
  std::vector<double> cum_span;  // [Hm]
};

double softplus64(double v) {
  return v > 20.0 ? v : std::log1p(std::exp(v));
}

std::vector<double> state_of(const Tensor& states, int64_t slot) {
  std::vector<double> v;
  for (int64_t h = 0; h < states.dim(1); ++h)
    for (int64_t p = 0; p < states.dim(2); ++p)
      for (int64_t n = 0; n < states.dim(3); ++n)
        v.push_back(get(states, {slot, h, p, n}));
  return v;
}

// The sequential recurrence over rows [row0, row0 + L); S0 empty = zero initial state.
SeqRef ssm_reference(const SsmProblem& pr, const SsmTokens& tk, int64_t row0, int64_t L,
                     const std::vector<double>& S0) {
  const int64_t Hm = pr.Hm, P = pr.P, N = pr.N, heads_per_group = pr.Hm / pr.G;
  SeqRef r;
  r.S = S0.empty() ? std::vector<double>(static_cast<size_t>(Hm * P * N), 0.0) : S0;
  r.Smag.resize(r.S.size());
  for (size_t i = 0; i < r.S.size(); ++i)
    r.Smag[i] = std::fabs(r.S[i]);
  r.y.resize(static_cast<size_t>(L * Hm * P));
  r.ymag.resize(r.y.size());
  r.cum_span.assign(static_cast<size_t>(Hm), 0.0);
  for (int64_t t = 0; t < L; ++t)
    for (int64_t h = 0; h < Hm; ++h) {
      const int64_t g = h / heads_per_group;
      const double dt = softplus64(get(tk.dt_raw, {row0 + t, h}) + get(pr.dt_bias, {h}));
      const double dA = std::exp(dt * get(pr.A, {h}));
      r.cum_span[h] += std::fabs(dt * get(pr.A, {h}));
      for (int64_t p = 0; p < P; ++p) {
        const double xv = get(tk.x, {row0 + t, h * P + p});
        double y = get(pr.D, {h}) * xv, ymag = std::fabs(y);
        for (int64_t n = 0; n < N; ++n) {
          const size_t i = static_cast<size_t>((h * P + p) * N + n);
          const double Bv = get(tk.B, {row0 + t, g * N + n}), Cv = get(tk.C, {row0 + t, g * N + n});
          r.S[i] = dA * r.S[i] + dt * xv * Bv;
          r.Smag[i] = dA * r.Smag[i] + dt * std::fabs(xv * Bv);
          y += r.S[i] * Cv;
          ymag += r.Smag[i] * std::fabs(Cv);
        }
        r.y[static_cast<size_t>(t * Hm * P + h * P + p)] = y;
        r.ymag[static_cast<size_t>(t * Hm * P + h * P + p)] = ymag;
      }
    }
  return r;
}

double ssm_band(double mag, double value, double cum_span, int64_t chunks, int64_t Q, int64_t N,
                DType store) {
  const double roundings =
      static_cast<double>(chunks + 1) * static_cast<double>(2 * Q + 2 * N + 16) + 8.0 * cum_span;
  return std::ldexp(1.0, -24) * mag * roundings + unit_roundoff(store) * std::fabs(value);
}

struct ScanCall {
  std::vector<int32_t> cu, slots, has_initial;
  int64_t chunk = 128;
};

void run_scan(SsmProblem& pr, const SsmTokens& tk, const ScanCall& call, const Tensor& out) {
  ops::SsmScanArgs a;
  a.x = tk.x;
  a.dt_raw = tk.dt_raw;
  a.A = pr.A;
  a.B = tk.B;
  a.C = tk.C;
  a.D = pr.D;
  a.dt_bias = pr.dt_bias;
  a.ssm_states = pr.states;
  a.cu_seqlens = i32_tensor(call.cu);
  a.slots = i32_tensor(call.slots);
  a.has_initial = i32_tensor(call.has_initial);
  a.heads = pr.Hm;
  a.head_dim = pr.P;
  a.groups = pr.G;
  a.state_size = pr.N;
  a.chunk_size = call.chunk;
  a.out = out;
  OpContext ctx;
  ops::run(ctx, a);
}

struct ScanCase {
  int64_t Hm, P, G, N, S, Q;
  DType act, param;
  std::vector<int32_t> lens, slots, has_initial;
  bool in_place;
  double tiny_dt = 0;  // > 0: every dt_bias = softplus^-1(tiny_dt), so dt spans ~tiny_dt e^+-3
};

// dt_bias whose softplus is `dt` (dt_raw ~ N(0, 1) then spreads dt over a few decades).
void set_tiny_dt(SsmProblem& pr, double dt) {
  for (int64_t h = 0; h < pr.Hm; ++h)
    set(pr.dt_bias, {h}, std::log(std::expm1(dt)));
}

void run_scan_case(const ScanCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("Hm={} P={} G={} N={} Q={} act={} in_place={}", c.Hm, c.P, c.G, c.N, c.Q,
                           dtype_name(c.act), c.in_place));
  std::mt19937_64 rng(seed);
  SsmProblem pr = make_problem(c.Hm, c.P, c.G, c.N, c.S, c.act, c.param, rng);
  if (c.tiny_dt > 0) set_tiny_dt(pr, c.tiny_dt);
  ScanCall call{{0}, c.slots, c.has_initial, c.Q};
  for (int32_t l : c.lens)
    call.cu.push_back(call.cu.back() + l);
  const int64_t T = call.cu.back();
  SsmTokens tk = make_tokens(pr, T, rng);
  const SsmTokens tk0{tk.xbc, tk.dtw, clone(tk.x), clone(tk.B), clone(tk.C), clone(tk.dt_raw)};
  const Tensor states0 = clone(pr.states);
  WideRows out = wide_rows(T, c.Hm * c.P, 2, 1, c.act);
  run_scan(pr, tk, call, c.in_place ? tk.x : out.view);
  const Tensor y = c.in_place ? tk.x : out.view;

  Comparison cmp, cmp_state;
  std::vector<bool> used(static_cast<size_t>(c.S), false);
  for (size_t b = 0; b < c.lens.size(); ++b) {
    const int64_t L = c.lens[b], slot = c.slots[b];
    used[static_cast<size_t>(slot)] = true;
    const SeqRef r = ssm_reference(
        pr, tk0, call.cu[b], L, c.has_initial[b] ? state_of(states0, slot) : std::vector<double>{});
    const int64_t chunks = (L + c.Q - 1) / c.Q;
    for (int64_t t = 0; t < L; ++t)
      for (int64_t h = 0; h < c.Hm; ++h)
        for (int64_t p = 0; p < c.P; ++p) {
          const size_t i = static_cast<size_t>(t * c.Hm * c.P + h * c.P + p);
          cmp.check(get(y, {call.cu[b] + t, h * c.P + p}), r.y[i],
                    ssm_band(r.ymag[i], r.y[i], r.cum_span[h], chunks, c.Q, c.N, c.act),
                    fmt::format("seq {} y[{}, h{}, {}]", b, t, h, p));
        }
    const std::vector<double> S = state_of(pr.states, slot);
    for (size_t i = 0; i < S.size(); ++i) {
      const int64_t h = static_cast<int64_t>(i) / (c.P * c.N);
      cmp_state.check(S[i], r.S[i],
                      ssm_band(r.Smag[i], r.S[i], r.cum_span[h], chunks, c.Q, c.N, DType::F32),
                      fmt::format("seq {} state[{}]", b, i));
    }
  }
  for (int64_t slot = 0; slot < c.S; ++slot)
    if (!used[static_cast<size_t>(slot)]) {
      const std::vector<double> got = state_of(pr.states, slot), want = state_of(states0, slot);
      for (size_t i = 0; i < got.size(); ++i)
        cmp_state.check(got[i], want[i], 0.0, fmt::format("idle slot {}", slot));
    }
  EXPECT_EQ(cmp.compared, T * c.Hm * c.P);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(cmp_state.compared, c.S * c.Hm * c.P * c.N);
  EXPECT_EQ(cmp_state.failed, 0);
  if (!c.in_place) {
    EXPECT_EQ(out.touched_guards(), 0);
  }
}

TEST(HostSsmScan, ChunkedEqualsSequentialAroundChunkBoundaries) {
  const DType f32 = DType::F32, bf16 = DType::BF16;
  const ScanCase cases[] = {
      // lengths 1, Q-1, Q, Q+1 and several chunks, packed, slots permuted, has_initial mixed
      {4, 3, 1, 8, 6, 8, f32, f32, {1, 7, 8, 9, 29}, {5, 0, 3, 1, 2}, {1, 0, 1, 1, 0}, false},
      {4, 3, 2, 8, 6, 8, bf16, bf16, {1, 7, 8, 9, 29}, {2, 4, 0, 5, 1}, {0, 1, 1, 0, 1}, false},
      {6, 4, 3, 5, 4, 16, f32, bf16, {15, 16, 17, 50}, {3, 2, 1, 0}, {1, 1, 0, 1}, false},
      // the default chunk length of the released models
      {2,
       2,
       1,
       4,
       5,
       128,
       f32,
       f32,
       {1, 127, 128, 129, 300},
       {0, 1, 2, 3, 4},
       {1, 0, 1, 0, 1},
       false},
      // out aliases x; one sequence only; an empty sequence next to it
      {4, 2, 4, 3, 3, 5, bf16, f32, {23, 0}, {1, 2}, {1, 0}, true},
  };
  uint64_t seed = 200;
  for (const auto& c : cases)
    run_scan_case(c, seed++);
}

// Δ is not clamped (spec 3.2 step 4: vLLM applies no time_step_min / time_step_limit): dt down
// to ~1e-5 and below must reach the recurrence unchanged. A floor at time_step_min = 1e-3 would
// grow every state increment ~100x, far outside the f32 band.
TEST(HostSsmScan, TinyDtIsNotFloored) {
  const DType f32 = DType::F32, bf16 = DType::BF16;
  const ScanCase cases[] = {
      {4, 3, 2, 8, 4, 8, f32, f32, {9, 20}, {1, 3}, {1, 0}, false, 1e-5},
      {4, 3, 1, 8, 4, 8, bf16, f32, {17}, {2}, {0}, false, 1e-5},
  };
  uint64_t seed = 260;
  for (const auto& c : cases)
    run_scan_case(c, seed++);
}

// dt_raw + dt_bias > 20 takes softplus' identity branch: the state is almost replaced each
// step (exp(-20 |A|) decay) and cum grows fast.
TEST(HostSsmScan, LargeDtTakesTheIdentityBranch) {
  std::mt19937_64 rng(210);
  ScanCase c{2, 2, 1, 4, 1, 4, DType::F32, DType::F32, {11}, {0}, {1}, false};
  SsmProblem pr = make_problem(c.Hm, c.P, c.G, c.N, c.S, c.act, c.param, rng);
  set(pr.dt_bias, {0}, 24.0);
  ScanCall call{{0, 11}, {0}, {1}, 4};
  SsmTokens tk = make_tokens(pr, 11, rng);
  const Tensor states0 = clone(pr.states);
  Tensor out = Tensor::empty({11, 4}, DType::F32);
  poison(out);
  run_scan(pr, tk, call, out);
  const SeqRef r = ssm_reference(pr, tk, 0, 11, state_of(states0, 0));
  Comparison cmp;
  for (int64_t t = 0; t < 11; ++t)
    for (int64_t j = 0; j < 4; ++j) {
      const size_t i = static_cast<size_t>(t * 4 + j);
      cmp.check(get(out, {t, j}), r.y[i],
                ssm_band(r.ymag[i], r.y[i], r.cum_span[j / 2], 3, 4, 4, DType::F32),
                fmt::format("y[{}, {}]", t, j));
    }
  EXPECT_EQ(cmp.compared, 44);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_GT(r.cum_span[0], 200.0) << "head 0 must run with dt > 20";
}

// A prompt prefilled in two pieces (state carried through ssm_states) equals the prompt
// prefilled at once, up to f32 reassociation: both are checked against the float64
// recurrence, and against each other within the sum of their bands. Splits inside a chunk,
// on a chunk boundary, and after several chunks.
TEST(HostSsmScan, TwoPiecesEqualOnePiece) {
  for (DType act : {DType::F32, DType::BF16}) {
    for (int64_t split : {5, 8, 20}) {
      SCOPED_TRACE(fmt::format("act={} split={}", dtype_name(act), split));
      std::mt19937_64 rng(220 + static_cast<uint64_t>(split));
      const int64_t L = 37, Q = 8;
      SsmProblem whole = make_problem(4, 3, 2, 6, 2, act, DType::F32, rng);
      SsmProblem pieces = whole;
      pieces.states = clone(whole.states);
      const Tensor states0 = clone(whole.states);
      SsmTokens tk = make_tokens(whole, L, rng);
      Tensor out_whole = Tensor::empty({L, 12}, act), out_pieces = Tensor::empty({L, 12}, act);
      poison(out_whole);
      poison(out_pieces);
      run_scan(whole, tk, ScanCall{{0, static_cast<int32_t>(L)}, {1}, {0}, Q}, out_whole);
      SsmTokens first{tk.xbc,
                      tk.dtw,
                      tk.x.slice(0, 0, split),
                      tk.B.slice(0, 0, split),
                      tk.C.slice(0, 0, split),
                      tk.dt_raw.slice(0, 0, split)};
      SsmTokens second{tk.xbc,
                       tk.dtw,
                       tk.x.slice(0, split, L - split),
                       tk.B.slice(0, split, L - split),
                       tk.C.slice(0, split, L - split),
                       tk.dt_raw.slice(0, split, L - split)};
      run_scan(pieces, first, ScanCall{{0, static_cast<int32_t>(split)}, {1}, {0}, Q},
               out_pieces.slice(0, 0, split));
      run_scan(pieces, second, ScanCall{{0, static_cast<int32_t>(L - split)}, {1}, {1}, Q},
               out_pieces.slice(0, split, L - split));
      const SeqRef r = ssm_reference(whole, tk, 0, L, {});
      const int64_t chunks = (L + Q - 1) / Q + 1;  // the pieces add one chunk boundary
      Comparison cmp;
      for (int64_t t = 0; t < L; ++t)
        for (int64_t j = 0; j < 12; ++j) {
          const size_t i = static_cast<size_t>(t * 12 + j);
          const double band = ssm_band(r.ymag[i], r.y[i], r.cum_span[j / 3], chunks, Q, 6, act);
          cmp.check(get(out_whole, {t, j}), r.y[i], band, fmt::format("whole y[{}, {}]", t, j));
          cmp.check(get(out_pieces, {t, j}), r.y[i], band, fmt::format("pieces y[{}, {}]", t, j));
          cmp.check(get(out_pieces, {t, j}), get(out_whole, {t, j}), 2 * band,
                    fmt::format("pieces vs whole y[{}, {}]", t, j));
        }
      const std::vector<double> Sw = state_of(whole.states, 1), Sp = state_of(pieces.states, 1);
      for (size_t i = 0; i < Sw.size(); ++i) {
        const double band =
            ssm_band(r.Smag[i], r.S[i], r.cum_span[i / 18], chunks, Q, 6, DType::F32);
        cmp.check(Sp[i], r.S[i], band, fmt::format("pieces state[{}]", i));
        cmp.check(Sp[i], Sw[i], 2 * band, fmt::format("pieces vs whole state[{}]", i));
      }
      EXPECT_EQ(cmp.compared, 3 * L * 12 + 2 * 4 * 3 * 6);
      EXPECT_EQ(cmp.failed, 0);
      // Slot 0 belongs to no sequence: untouched by either run.
      EXPECT_EQ(state_of(pieces.states, 0), state_of(states0, 0));
    }
  }
}

// Decode: ssm_update applied T times (a batch of 3 sequences, slots permuted) equals one
// ssm_scan over the same T tokens from the same initial states.
// Also with dt down to ~1e-5 (no floor, see TinyDtIsNotFloored).
TEST(HostSsmUpdate, RepeatedStepsEqualScan) {
  for (const double tiny_dt : {0.0, 1e-5})
    for (DType act : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(fmt::format("{} tiny_dt {}", dtype_name(act), tiny_dt));
      std::mt19937_64 rng(230);
      const int64_t T = 10, nseq = 3, Hm = 4, P = 2, G = 2, N = 5, Q = 4;
      SsmProblem scan = make_problem(Hm, P, G, N, 4, act, act, rng);
      if (tiny_dt > 0) set_tiny_dt(scan, tiny_dt);
      SsmProblem upd = scan;
      upd.states = clone(scan.states);
      const Tensor states0 = clone(scan.states);
      const std::vector<int32_t> slots = {3, 0, 2};
      // Tokens of sequence b are rows b*T .. b*T+T-1 (packed for the scan).
      SsmTokens tk = make_tokens(scan, nseq * T, rng);
      Tensor out_scan = Tensor::empty({nseq * T, Hm * P}, act),
             out_upd = Tensor::empty({nseq * T, Hm * P}, act);
      poison(out_scan);
      poison(out_upd);
      run_scan(scan, tk, ScanCall{{0, T, 2 * T, 3 * T}, slots, {1, 1, 1}, Q}, out_scan);
      for (int64_t t = 0; t < T; ++t) {
        // Gather row t of every sequence into a decode batch, as the engine does.
        auto gather = [&](const Tensor& src) {
          Tensor g = Tensor::empty({nseq, src.dim(1)}, act);
          for (int64_t b = 0; b < nseq; ++b)
            for (int64_t j = 0; j < src.dim(1); ++j)
              set(g, {b, j}, get(src, {b * T + t, j}));
          return g;
        };
        ops::SsmUpdateArgs a;
        a.x = gather(tk.x);
        a.dt_raw = gather(tk.dt_raw);
        a.B = gather(tk.B);
        a.C = gather(tk.C);
        a.A = upd.A;
        a.D = upd.D;
        a.dt_bias = upd.dt_bias;
        a.ssm_states = upd.states;
        a.slots = i32_tensor(slots);
        a.heads = Hm;
        a.head_dim = P;
        a.groups = G;
        a.state_size = N;
        a.out = Tensor::empty({nseq, Hm * P}, act);
        poison(a.out);
        OpContext ctx;
        ops::run(ctx, a);
        for (int64_t b = 0; b < nseq; ++b)
          for (int64_t j = 0; j < Hm * P; ++j)
            set(out_upd, {b * T + t, j}, get(a.out, {b, j}));
      }
      Comparison cmp;
      for (int64_t b = 0; b < nseq; ++b) {
        const int64_t slot = slots[static_cast<size_t>(b)];
        const SeqRef r = ssm_reference(scan, tk, b * T, T, state_of(states0, slot));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t j = 0; j < Hm * P; ++j) {
            const size_t i = static_cast<size_t>(t * Hm * P + j);
            const double h = static_cast<double>(j / P);
            const double scan_band = ssm_band(r.ymag[i], r.y[i], r.cum_span[static_cast<size_t>(h)],
                                              (T + Q - 1) / Q, Q, N, act);
            const double upd_band =
                ssm_band(r.ymag[i], r.y[i], r.cum_span[static_cast<size_t>(h)], T, 1, N, act);
            cmp.check(get(out_upd, {b * T + t, j}), r.y[i], upd_band,
                      fmt::format("update seq {} y[{}, {}]", b, t, j));
            cmp.check(get(out_upd, {b * T + t, j}), get(out_scan, {b * T + t, j}),
                      scan_band + upd_band,
                      fmt::format("update vs scan seq {} y[{}, {}]", b, t, j));
          }
        const std::vector<double> Su = state_of(upd.states, slot), Ss = state_of(scan.states, slot);
        for (size_t i = 0; i < Su.size(); ++i) {
          const size_t h = i / static_cast<size_t>(P * N);
          const double band = ssm_band(r.Smag[i], r.S[i], r.cum_span[h], T, Q, N, DType::F32);
          cmp.check(Su[i], r.S[i], band, fmt::format("update seq {} state[{}]", b, i));
          cmp.check(Su[i], Ss[i], 2 * band, fmt::format("update vs scan seq {} state[{}]", b, i));
        }
      }
      EXPECT_EQ(cmp.compared, 2 * nseq * T * Hm * P + 2 * nseq * Hm * P * N);
      EXPECT_EQ(cmp.failed, 0);
      EXPECT_EQ(state_of(upd.states, 1), state_of(states0, 1)) << "slot 1 is idle";
    }
}

TEST(HostSsmScan, BadArgumentsAreRejected) {
  std::mt19937_64 rng(240);
  SsmProblem pr = make_problem(4, 2, 2, 3, 2, DType::F32, DType::F32, rng);
  SsmTokens tk = make_tokens(pr, 5, rng);
  Tensor out = Tensor::empty({5, 8}, DType::F32);
  EXPECT_THROW(run_scan(pr, tk, ScanCall{{0, 5}, {2}, {0}, 8}, out), Error);  // slot outside pool
  EXPECT_THROW(run_scan(pr, tk, ScanCall{{0, 2, 5}, {1, 1}, {0, 0}, 8}, out), Error);  // slot twice
  EXPECT_THROW(run_scan(pr, tk, ScanCall{{0, 4}, {1}, {0}, 8}, out),
               Error);  // cu_seqlens short of T
  EXPECT_THROW(run_scan(pr, tk, ScanCall{{0, 5}, {1}, {0}, 0}, out), Error);  // chunk_size 0
  pr.G = 3;  // does not divide heads
  EXPECT_THROW(run_scan(pr, tk, ScanCall{{0, 5}, {1}, {0}, 8}, out), Error);
}

}  // namespace
}  // namespace strata::reftest
