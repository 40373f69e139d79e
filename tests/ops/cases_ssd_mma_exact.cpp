// Cases: ssm_scan_mma_exact. The tensor-core SSD kernels (cuda.ssd_mma, ssm_scan_mma.cu, and the
// one-pass cuda.ssd_fused / cuda.ssd_chain, ssm_scan_fused.cu, which keep the same rounding
// points) against a
// float64 emulation of its own arithmetic: the same three bf16 operand roundings at the same
// points, everything else exact, each value carrying a bound on the device's f32 error
// (rounding_bounds.h). The op harness's ssm_scan cases judge this kernel against the unrounded
// f32 host op at bf16 tolerance; here the tolerance is f32-level, so moving, adding or dropping
// a rounding point fails. The emulation, for chunk c of a sequence, head h (group g), positions
// l, s < len of the chunk, cum_l = sum_{j<=l} dt_j A (the kernel's header has the same list):
//   CB[l][s]   = C_l . B_s                                       f32 sum of N exact products
//   bw[n][s]   = bf16(exp(cum_last - cum_s) dt_s B_s[n])          rounding 1 (chunk states)
//   S_loc[p][n]= sum_s x_s[p] bw[n][s]                            f32 sum of len products
//   S_in       = bf16(run),  run <- exp(cum_last) run + S_loc     rounding 2 (state entering)
//   score[l][s]= bf16(CB[l][s] exp(cum_l - cum_s) dt_s)           rounding 3 (decayed scores)
//   y[l][p]    = bf16(exp(cum_l) sum_n C_l[n] S_in[p][n] + sum_{s<=l} score[l][s] x_s[p]
//                     + D x_l[p])                                 one f32 accumulator
//   final state = run after the last chunk (f32).
// Accepted: y_dev between bf16(y - e) and bf16(y + e); the state within its bound plus its f32
// storage rounding; every slot no sequence names untouched (bit-exact).
#include <cmath>
#include <string_view>

#include "cases_util.h"
#include "rounding_bounds.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

constexpr const char* kMmaKernels[] = {"cuda.ssd_mma", "cuda.ssd_fused", "cuda.ssd_chain",
                                       "cuda.ssd_wg", "cuda.ssd_seq"};
constexpr int64_t kMinSlots = 5;

struct Shape5 {
  const char* name;
  int64_t Hm, P, G, N, chunk;
  std::vector<int32_t> lens;
  std::vector<int32_t> has_initial;
  bool bf16_params;
  bool aligned;  // x, B, C at 16-byte aligned columns (the kernel's vector staging)
};

double at(const Tensor& t, int64_t row, int64_t col) {
  return load_as_f64(t.raw(), t.dtype(), static_cast<size_t>(row * t.stride(0) + col));
}
double at1(const Tensor& t, int64_t i) {
  return load_as_f64(t.raw(), t.dtype(), static_cast<size_t>(i));
}

// The emulated outputs: y [T, Hm*P] and the final states [slots, Hm, P, N], each with its bound.
struct Expected {
  std::vector<double> y, y_err, st, st_err;
  std::vector<bool> st_written;  // slots a sequence names
};

// CUDA's expf errs by <= 2 ulp, __expf by <= 2 + floor(1.173 |x|) ulp (CUDA C Programming
// Guide, intrinsic functions); one ulp is at most 2 u relative.
double expf_rel() {
  return 4.0 * kU32;
}
double fast_expf_rel(double x) {
  return 2.0 * kU32 * (2.0 + std::floor(1.173 * std::fabs(x)));
}

Expected emulate(const SsmScanArgs& a, const std::vector<int32_t>& lens,
                 const std::vector<int32_t>& has_init) {
  const int64_t Hm = a.heads, P = a.head_dim, G = a.groups, N = a.state_size, Q = a.chunk_size;
  const int64_t T = a.x.dim(0), PN = P * N;
  Expected ex;
  ex.y.assign(static_cast<size_t>(T * Hm * P), 0.0);
  ex.y_err.assign(ex.y.size(), 0.0);
  const int64_t slots = a.ssm_states.dim(0);
  ex.st.resize(static_cast<size_t>(slots * Hm * PN));
  for (size_t i = 0; i < ex.st.size(); ++i)
    ex.st[i] = a.ssm_states.data<float>()[i];
  ex.st_err.assign(ex.st.size(), 0.0);
  ex.st_written.assign(static_cast<size_t>(slots), false);
  const int log2q = static_cast<int>(std::ceil(std::log2(static_cast<double>(Q))));

  int64_t t_seq = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t L = lens[b], slot = a.slots.data<int32_t>()[b];
    ex.st_written[static_cast<size_t>(slot)] = true;
    for (int64_t h = 0; h < Hm; ++h) {
      const int64_t g = h / (Hm / G);
      const double A = a.A.data<float>()[h], Dh = at1(a.D, h);
      const float bias = static_cast<float>(at1(a.dt_bias, h));
      // run[p][n]: the f32 running state and its bound.
      std::vector<double> run(static_cast<size_t>(PN), 0.0), run_e(static_cast<size_t>(PN), 0.0);
      const size_t st0 = static_cast<size_t>((slot * Hm + h) * PN);
      if (has_init[b])
        for (int64_t i = 0; i < PN; ++i)
          run[static_cast<size_t>(i)] = a.ssm_states.data<float>()[st0 + static_cast<size_t>(i)];
      for (int64_t c0 = 0; c0 < L; c0 += Q) {
        const int64_t len = std::min(Q, L - c0), t0 = t_seq + c0;
        // dt (softplus of an f32 sum the host forms bit-exactly: expf and log1pf 2 ulp each)
        // and the in-chunk cumsum (Hillis-Steele: a tree of depth log2 Q over terms of one sign).
        std::vector<double> dt(static_cast<size_t>(len)), dt_e(dt.size()), cum(dt.size()),
            cum_e(dt.size());
        double run_cum = 0.0, run_cum_e = 0.0;
        for (int64_t l = 0; l < len; ++l) {
          const float z = static_cast<float>(at(a.dt_raw, t0 + l, h)) + bias;
          const double d = z > 20.f ? z : std::log1p(std::exp(static_cast<double>(z)));
          dt[l] = d;
          dt_e[l] = z > 20.f ? 0.0 : 8.0 * kU32 * d;
          const double av = d * A;
          run_cum += av;
          run_cum_e += std::fabs(A) * dt_e[l] + kU32 * std::fabs(av);
          cum[l] = run_cum;
          cum_e[l] = run_cum_e + log2q * kU32 * std::fabs(run_cum);
        }
        const double last = cum[len - 1], last_e = cum_e[len - 1];
        // The chunk's bf16 inputs as doubles: B_s, C_l [len][N] of group g, x_s [len][P] of head h.
        std::vector<double> Bd(static_cast<size_t>(len * N)), Cd(Bd.size()),
            Xd(static_cast<size_t>(len * P));
        for (int64_t l = 0; l < len; ++l) {
          for (int64_t n = 0; n < N; ++n) {
            Bd[static_cast<size_t>(l * N + n)] = at(a.B, t0 + l, g * N + n);
            Cd[static_cast<size_t>(l * N + n)] = at(a.C, t0 + l, g * N + n);
          }
          for (int64_t p = 0; p < P; ++p)
            Xd[static_cast<size_t>(l * P + p)] = at(a.x, t0 + l, h * P + p);
        }
        auto Bv = [&](int64_t s, int64_t n) { return Bd[static_cast<size_t>(s * N + n)]; };
        auto Cv = [&](int64_t l, int64_t n) { return Cd[static_cast<size_t>(l * N + n)]; };
        auto Xv = [&](int64_t s, int64_t p) { return Xd[static_cast<size_t>(s * P + p)]; };

        // Rounding 1: bw[n][s] = bf16(exp(last - cum_s) dt_s B_s[n]) (f32: expf, two products).
        std::vector<Bounded> bw(static_cast<size_t>(N * len));
        for (int64_t s = 0; s < len; ++s) {
          const double dd = last - cum[s], dd_e = last_e + cum_e[s] + kU32 * std::fabs(dd);
          const double E = std::exp(dd), E_e = E * (dd_e + expf_rel());
          const double w = E * dt[s], w_e = dt[s] * E_e + E * dt_e[s] + kU32 * w;
          for (int64_t n = 0; n < N; ++n) {
            const double v = w * Bv(s, n);
            bw[n * len + s] =
                round_bf16_bounded(v, std::fabs(Bv(s, n)) * w_e + kU32 * std::fabs(v));
          }
        }
        // S_loc and the state passing; rounding 2 takes the state entering the chunk.
        std::vector<Bounded> sin(static_cast<size_t>(PN));
        const double Ec = std::exp(last), Ec_e = Ec * (last_e + expf_rel());
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n) {
            F32Sum S;
            for (int64_t s = 0; s < len; ++s) {
              const double x = Xv(s, p);
              const Bounded& o = bw[n * len + s];
              S.add(x * o.v, std::fabs(x) * o.e);
            }
            const size_t i = static_cast<size_t>(p * N + n);
            sin[i] = round_bf16_bounded(run[i], run_e[i]);
            const double prod = Ec * run[i], next = prod + S.v;
            run_e[i] = Ec * run_e[i] + std::fabs(run[i]) * Ec_e + S.err() +
                       kU32 * (std::fabs(prod) + std::fabs(next));
            run[i] = next;
          }
        // Outputs: Y_off through S_in, then the rounded scores (rounding 3), then D x, all in one
        // f32 accumulator per (l, p).
        for (int64_t l = 0; l < len; ++l) {
          std::vector<Bounded> score(static_cast<size_t>(l + 1));
          for (int64_t s = 0; s <= l; ++s) {
            F32Sum cb;
            for (int64_t n = 0; n < N; ++n)
              cb.add(Cv(l, n) * Bv(s, n));
            const double dd = cum[l] - cum[s], dd_e = cum_e[l] + cum_e[s] + kU32 * std::fabs(dd);
            const double E = std::exp(dd), E_e = E * (dd_e + fast_expf_rel(dd));
            const double v = cb.v * E * dt[s];
            const double v_e = E * dt[s] * cb.err() + std::fabs(cb.v) * dt[s] * E_e +
                               std::fabs(cb.v) * E * dt_e[s] + 2.0 * kU32 * std::fabs(v);
            score[s] = round_bf16_bounded(v, v_e);
          }
          const double El = std::exp(cum[l]), El_e = El * (cum_e[l] + expf_rel());
          for (int64_t p = 0; p < P; ++p) {
            F32Sum off;
            for (int64_t n = 0; n < N; ++n) {
              const Bounded& si = sin[p * N + n];
              off.add(Cv(l, n) * si.v, std::fabs(Cv(l, n)) * si.e);
            }
            const double yo = El * off.v;
            F32Sum acc(yo, El * off.err() + std::fabs(off.v) * El_e + kU32 * std::fabs(yo));
            for (int64_t s = 0; s <= l; ++s) {
              const double x = Xv(s, p);
              acc.add(score[s].v * x, score[s].e * std::fabs(x));
            }
            const double dx = Dh * Xv(l, p), y = acc.v + dx;
            const size_t yi = static_cast<size_t>((t0 + l) * Hm * P + h * P + p);
            ex.y[yi] = y;
            ex.y_err[yi] = acc.err() + kU32 * (std::fabs(dx) + std::fabs(y));
          }
        }
      }
      for (int64_t i = 0; i < PN; ++i) {
        ex.st[st0 + static_cast<size_t>(i)] = run[static_cast<size_t>(i)];
        ex.st_err[st0 + static_cast<size_t>(i)] = run_e[static_cast<size_t>(i)];
      }
    }
    t_seq += L;
  }
  return ex;
}

// Random inputs on the kernel's layout: x, B, C and dt as column ranges of one in_proj-like row.
SsmScanArgs make_args(const Shape5& s, Rng& rng, int64_t T) {
  SsmScanArgs a;
  const int64_t xw = s.Hm * s.P, bw = s.G * s.N, lead = s.aligned ? 8 : 17;
  // Aligned: the row stride too is a multiple of 8 elements (16 bytes), as the model's rows are.
  const int64_t used = lead + xw + 2 * bw + s.Hm, width = s.aligned ? (used + 7) / 8 * 8 : used;
  const Tensor row = normal_tensor(rng, Shape{T, width}, DType::BF16, 1.f);
  a.x = row.slice(1, lead, xw);
  a.B = row.slice(1, lead + xw, bw);
  a.C = row.slice(1, lead + xw + bw, bw);
  a.dt_raw = row.slice(1, lead + xw + 2 * bw, s.Hm);
  // Mamba2's initialization: A in [-16, -1], dt_bias the inverse softplus of dt in [1e-3, 0.1].
  const DType param = s.bf16_params ? DType::BF16 : DType::F32;
  a.A = Tensor::empty(Shape{s.Hm}, DType::F32);
  a.dt_bias = Tensor::empty(Shape{s.Hm}, param);
  for (int64_t h = 0; h < s.Hm; ++h) {
    a.A.data<float>()[h] = -std::exp(rng.uniform(0.f, 2.77f));
    const float dt0 = std::exp(rng.uniform(std::log(1e-3f), std::log(1e-1f)));
    store_from_f32(a.dt_bias.raw(), param, static_cast<size_t>(h), std::log(std::expm1(dt0)));
  }
  a.D = uniform_tensor(rng, Shape{s.Hm}, param, 0.5f, 1.5f);
  const int64_t slots = std::max<int64_t>(kMinSlots, static_cast<int64_t>(s.lens.size()) + 1);
  set_scan_layout(a, rng, {s.Hm, s.P, s.G, s.N, s.chunk, slots}, s.lens, s.has_initial,
                  DType::BF16);
  return a;
}

Outcome run_exact(const Shape5& s, const char* kernel, Rng& rng) {
  int64_t T = 0;
  for (int32_t l : s.lens)
    T += l;
  SsmScanArgs a = make_args(s, rng, T);
  const int64_t xw = s.Hm * s.P;

  // Emulated before the host op runs (it updates the states in place).
  auto ex = std::make_shared<Expected>(emulate(a, s.lens, s.has_initial));
  auto worst = std::make_shared<double>(0.0);
  const int64_t PN = s.P * s.N, slots = a.ssm_states.dim(0);
  OutputCheck check = [ex, worst, T, xw, slots](int index, const Tensor&,
                                                const Tensor& dev) -> std::string {
    int64_t bad = 0, compared = 0;
    std::string first;
    auto note = [&](const std::string& what) {
      if (++bad <= 5) first += "    " + what + "\n";
    };
    if (index == 11) {  // out [T, Hm*P] bf16
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < xw; ++c) {
          const size_t i = static_cast<size_t>(t * xw + c);
          const double d =
              load_as_f64(dev.raw(), dev.dtype(), static_cast<size_t>(t * dev.stride(0) + c));
          ++compared;
          const double half_ulp = half_ulp_bf16(ex->y[i]);
          *worst = std::max(*worst, std::fabs(d - ex->y[i]) / (ex->y_err[i] + half_ulp));
          // 1e-30: f32 subnormals (fully decayed terms) err absolutely, not relatively.
          if (!std::isfinite(d) || !bf16_within(d, ex->y[i], ex->y_err[i] + 1e-30))
            note(fmt::format("y[{}][{}] = {} outside bf16 of {} +- {:.3g}", t, c, d, ex->y[i],
                             ex->y_err[i]));
        }
      if (compared != T * xw) return fmt::format("compared {} of {} y elements", compared, T * xw);
    } else if (index == 7) {  // ssm_states [slots, Hm, P, N] f32
      const int64_t n = static_cast<int64_t>(ex->st.size());
      for (int64_t i = 0; i < n; ++i) {
        const double d = dev.data<float>()[i], want = ex->st[static_cast<size_t>(i)];
        ++compared;
        if (!ex->st_written[static_cast<size_t>(i / (n / slots))]) {
          if (d != want)
            note(fmt::format("state {} of an unnamed slot changed: {} (was {})", i, d, want));
          continue;
        }
        const double tol = ex->st_err[static_cast<size_t>(i)] + kU32 * std::fabs(want) + 1e-30;
        *worst = std::max(*worst, std::fabs(d - want) / (tol + 1e-30));
        if (!(std::fabs(d - want) <= tol))
          note(fmt::format("state {} = {} vs {} +- {:.3g}", i, d, want, tol));
      }
      if (compared != n) return fmt::format("compared {} of {} state elements", compared, n);
    } else {
      return "skip";
    }
    if (bad == 0) return "";
    return fmt::format("{} elements outside the f32-level band of the emulation:\n{}", bad, first);
  };
  Tolerance unused;
  Outcome o = run_case(a, DType::BF16, unused, {}, check, kernel);
  o.worst = *worst;
  if (o.status == Outcome::Passed && o.kernels != kernel) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("{} did not run (ran: {})", kernel, o.kernels);
  }
  const int64_t want = T * xw + slots * s.Hm * PN;
  if (o.status == Outcome::Passed && o.compared != want) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("compared {} elements, expected {}", o.compared, want);
  }
  return o;
}

std::vector<OpCase> all() {
  // The models' head, group and state shapes (lengths around the chunk, continuations with and
  // without initial states) and the kernel's odd limits (chunks of 16, 32 and 48, N = 16, 48,
  // 64, 256, head_dim 80 with chunk 32), at odd and aligned column offsets.
  const Shape5 shapes[] = {
      {"nano3",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {1, 127, 128, 129, 300},
       {1, 0, 1, 0, 1},
       true,
       false},
      {"nano3 aligned",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {200, 5},
       {1, 0},
       false,
       true},
      // One sequence over every head: cuda.ssd_seq takes it with a cluster of 2 blocks per
      // head on a 132-SM device (64 heads), handing the state from block to block.
      {"nano3 one sequence",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {700},
       {1},
       false,
       true},
      // The same with an odd chunk count (block 0 takes the last chunk and writes the final
      // state, from block 1's chunk states) and no initial state, and with one chunk (block 1
      // of the cluster takes none).
      {"nano3 one sequence, 5 chunks",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {520},
       {0},
       false,
       true},
      {"nano3 one sequence, 1 chunk",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {90},
       {1},
       true,
       true},
      {"9b",
       Nano9B::heads,
       Nano9B::head_dim,
       Nano9B::groups,
       Nano9B::state,
       128,
       {129, 1, 140},
       {0, 1, 1},
       true,
       true},
      {"47b/56b state N=256 (32 of 256 heads)",
       32,
       64,
       8,
       256,
       128,
       {257, 3},
       {1, 0},
       false,
       false},
      {"chunk 32 N=64 head_dim 80",
       4,
       80,
       2,
       64,
       32,
       {70, 31, 32, 33, 1},
       {1, 0, 1, 0, 0},
       false,
       false},
      {"chunk 16 N=16", 2, 64, 1, 16, 16, {40, 15, 0}, {0, 1, 1}, true, false},
      {"chunk 48 N=48", 2, 64, 2, 48, 48, {100, 47}, {1, 0}, false, true},
      // Around 2,048 tokens (a chain of 17 chunks per head), lengths on and around the chunk
      // boundaries, and many short sequences in one call (the one-pass kernel's chunk
      // neighbours belong to different sequences), two of no tokens (a fresh one, whose state
      // is cleared, and a continued one).
      {"nano3 dims, 4 heads, long",
       4,
       Nano3::head_dim,
       1,
       Nano3::state,
       128,
       {2047, 2049, 1},
       {1, 0, 1},
       false,
       true},
      {"nano3 dims, many short",
       8,
       Nano3::head_dim,
       2,
       Nano3::state,
       128,
       {1,   2, 17, 127, 128, 129, 255, 256, 257, 3,   0, 64, 1,
        200, 5, 90, 31,  16,  15,  33,  1,   384, 100, 0, 7,  128},
       {1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1},
       true,
       true},
      // More sequences than table_dt_rows_kernel takes (kTableSeqs, 32): the wgmma scans start
      // with the chunk table kernel and dt_rows_kernel here.
      {"nano3 dims, 2 heads, 40 sequences",
       2,
       Nano3::head_dim,
       1,
       Nano3::state,
       128,
       {130, 1, 128, 0, 255, 17, 256, 3, 129, 64,  1, 200, 127, 2, 384, 5,   90, 31,  16, 15,
        33,  1, 100, 7, 128, 0,  257, 9, 60,  131, 2, 44,  300, 1, 77,  128, 12, 250, 3,  140},
       {0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1,
        1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0},
       false,
       true},
      {"9b dims, 8 heads, 256 and 1",
       8,
       Nano9B::head_dim,
       1,
       Nano9B::state,
       128,
       {256, 1, 384},
       {1, 1, 0},
       false,
       true},
  };
  std::vector<OpCase> out;
  for (const char* kernel : kMmaKernels)
    for (const Shape5& s : shapes) {
      // cuda.ssd_wg and cuda.ssd_seq take chunk 128, state 128, head_dim 64 / 80 at aligned
      // columns only.
      const bool wg_shape = s.aligned && s.chunk == 128 && s.N == 128 && (s.P == 64 || s.P == 80);
      const std::string_view name(kernel);
      if ((name == "cuda.ssd_wg" || name == "cuda.ssd_seq") && !wg_shape) continue;
      out.push_back(
          {"ssm_scan_mma_exact",
           fmt::format("{} {} heads={}x{} groups={} N={} chunk={} lens {} has_initial {}{}{}",
                       kernel, s.name, s.Hm, s.P, s.G, s.N, s.chunk, fmt::join(s.lens, ","),
                       fmt::join(s.has_initial, ","), s.bf16_params ? " bf16 params" : "",
                       s.aligned ? " aligned" : ""),
           true, [s, kernel](Rng& rng) { return run_exact(s, kernel, rng); }});
    }
  return out;
}

}  // namespace

STRATA_OP_CASES(all);

}  // namespace strata::opstest
