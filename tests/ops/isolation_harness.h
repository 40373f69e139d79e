// The machinery of the "isolation" cases (cases_isolation.cpp): poisoning a packed batch's rows
// and state slots, each op's single-sequence view of a batch, the host reference per clean
// sequence, and the comparisons of a run (on the GPU: every CUDA kernel that takes the batch; on
// the host: the host op against itself). The case builders and the table are in
// cases_isolation.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cases_util.h"

namespace strata::opstest::isolation {

using namespace strata::ops;

// NaN, +Inf and -Inf in turn along a row, shifted per row.
inline float poison_value(int64_t r, int64_t c) {
  switch ((r + c) % 3) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return std::numeric_limits<float>::infinity();
    default:
      return -std::numeric_limits<float>::infinity();
  }
}

// Rows r0 .. r0+n of a [T, W] row view (its columns only: neighbours in the wider row stay).
inline void poison_rows(Tensor& t, int64_t r0, int64_t n) {
  for (int64_t r = r0; r < r0 + n; ++r)
    for (int64_t c = 0; c < t.dim(1); ++c)
      store_from_f32(t.raw(), t.dtype(), static_cast<size_t>(r * t.stride(0) + c),
                     poison_value(r, c));
}

// Every element of state slot `slot` of a contiguous [S, ...] state tensor.
inline void poison_slot(Tensor& states, int64_t slot) {
  const int64_t per = states.numel() / states.dim(0);
  for (int64_t i = 0; i < per; ++i)
    store_from_f32(states.raw(), states.dtype(), static_cast<size_t>(slot * per + i),
                   poison_value(slot, i));
}

// A fresh contiguous host copy of rows r0 .. r0+n of a [T, W] row view: shares no storage with
// the batch, so the single-sequence reference cannot read the poisoned rows.
inline Tensor fresh_rows(const Tensor& t, int64_t r0, int64_t n) {
  Tensor o = Tensor::empty(Shape{n, t.dim(1)}, t.dtype());
  const size_t es = dtype_size(t.dtype()), row = static_cast<size_t>(t.dim(1)) * es;
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(
        static_cast<char*>(o.raw()) + static_cast<size_t>(r) * row,
        static_cast<const char*>(t.raw()) + static_cast<size_t>((r0 + r) * t.stride(0)) * es, row);
  return o;
}

// Slot `slot` of a contiguous [S, ...] state tensor as a fresh [1, ...] tensor.
inline Tensor fresh_slot(const Tensor& states, int64_t slot) {
  std::vector<int64_t> dims = states.shape().vec();
  dims[0] = 1;
  Tensor o = Tensor::empty(Shape(dims), states.dtype());
  std::memcpy(o.raw(),
              static_cast<const char*>(states.raw()) + static_cast<size_t>(slot) * o.nbytes(),
              o.nbytes());
  return o;
}

inline Tensor fresh_copy(const Tensor& t) {
  Tensor o = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(o.raw(), t.raw(), t.nbytes());
  return o;
}

// One sequence of the batch: rows t0 .. t0+len of the row tensors, state slot, has_initial.
struct Seq {
  int64_t t0 = 0, len = 0, slot = 0;
  int32_t init = 1;
};

// A case: the (poisoned) batch, its sequences, which one is poisoned, the tolerance of the clean
// ones' outputs and the CUDA kernels that must take it.
template <class Args>
struct Iso {
  Args a;
  std::vector<Seq> seqs;
  size_t bad = 0;
  DType act = DType::F32;
  Tolerance tol;
  std::vector<Tensor> state_extra;  // per sequence: extra_abs of its final state (or undefined)
  std::vector<std::string> need;
};

// ---- per-op access: the row output, the state tensor, one sequence as its own batch ----

template <class Args>
Tensor& states_of(Args& a) {
  if constexpr (requires { a.ssm_states; })
    return a.ssm_states;
  else
    return a.conv_states;
}

// One sequence of the batch as its own batch (slot 0): fresh copies of its rows (len of them for
// the prefill ops, which take cu_seqlens; one for the decode ops) and of its state slot.
template <class Args>
Args single(const Args& a, const Seq& s) {
  constexpr bool kPrefill = requires {
    a.cu_seqlens;
  };
  const int64_t rows = kPrefill ? s.len : 1;
  Args o = a;
  o.x = fresh_rows(a.x, s.t0, rows);
  if constexpr (requires { a.ssm_states; }) {
    o.dt_raw = fresh_rows(a.dt_raw, s.t0, rows);
    o.B = fresh_rows(a.B, s.t0, rows);
    o.C = fresh_rows(a.C, s.t0, rows);
    o.ssm_states = fresh_slot(a.ssm_states, s.slot);
  } else {
    o.conv_states = fresh_slot(a.conv_states, s.slot);
  }
  if constexpr (kPrefill) {
    o.cu_seqlens = i32_tensor({0, static_cast<int32_t>(s.len)});
    o.has_initial = i32_tensor({s.init});
  }
  o.slots = i32_tensor({0});
  o.out = Tensor::empty(Shape{rows, a.out.dim(1)}, a.out.dtype());
  return o;
}

template <class Args>
void run_host(Args& a) {
  for (const auto& k : OpTable<Args>::kernels()) {
    if (k.device != Device::Host) continue;
    std::string why;
    STRATA_CHECK(k.supports(a, &why), "host {} refuses an isolation case: {}", Args::kName, why);
    OpContext ctx;
    ctx.device = Device::Host;
    k.run(a, ctx);
    return;
  }
  STRATA_CHECK(false, "no host kernel for {}", Args::kName);
}

// The expected results of the clean sequences, each from its own single-sequence host run, and
// the state tensor as it was before any run.
struct Ref {
  std::vector<Tensor> y, st;  // per sequence (undefined for the poisoned one)
  Tensor init;
};

template <class Args>
Ref reference(Iso<Args>& iso) {
  Ref r;
  r.init = fresh_copy(states_of(iso.a));
  r.y.resize(iso.seqs.size());
  r.st.resize(iso.seqs.size());
  for (size_t i = 0; i < iso.seqs.size(); ++i) {
    if (i == iso.bad) continue;
    Args s = single(iso.a, iso.seqs[i]);
    run_host(s);
    r.y[i] = s.out;
    r.st[i] = states_of(s);
  }
  return r;
}

inline std::string seq_name(const Seq& s, size_t i) {
  return fmt::format("sequence {} (rows {}..{}, slot {}, has_initial {})", i, s.t0, s.t0 + s.len,
                     s.slot, s.init);
}

// Compares `got` with `want` (contiguous, same shape): by the tolerance, or bit for bit.
inline void compare_part(const std::string& what, const Tensor& want, const Tensor& got, DType act,
                         const Tolerance& tol, bool exact, Outcome& out) {
  if (!exact) {
    Outcome one;
    detail::compare_output(0, want, got, act, tol, {}, one);
    out.compared += one.compared;
    out.worst = std::max(out.worst, one.worst);
    if (one.status == Outcome::Failed) {
      out.status = Outcome::Failed;
      out.detail += "  " + what + ":\n" + one.detail;
    }
    return;
  }
  int64_t bad = 0;
  const int64_t n = want.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double w = load_as_f64(want.raw(), want.dtype(), static_cast<size_t>(i));
    const double g = load_as_f64(got.raw(), got.dtype(), static_cast<size_t>(i));
    if (!std::isfinite(w) || !(w == g) || std::signbit(w) != std::signbit(g)) {
      if (++bad <= 3)
        out.detail += fmt::format("  {}: element {}: batch {} vs alone {}\n", what, i, g, w);
    }
  }
  out.compared += n;
  if (bad) {
    out.status = Outcome::Failed;
    out.detail += fmt::format("  {}: {} of {} elements differ\n", what, bad, n);
  }
}

// The clean sequences' rows of y [T, W] (a host copy of the batch's output).
template <class Args>
void compare_rows(const Iso<Args>& iso, const Ref& r, const Tensor& y, bool exact, Outcome& out) {
  for (size_t i = 0; i < iso.seqs.size(); ++i) {
    if (i == iso.bad) continue;
    const Seq& s = iso.seqs[i];
    compare_part(seq_name(s, i) + " output rows", r.y[i], fresh_rows(y, s.t0, s.len), iso.act,
                 iso.tol, exact, out);
  }
}

// The clean sequences' slots by the tolerance, every slot no sequence names bit for bit.
template <class Args>
void compare_slots(const Iso<Args>& iso, const Ref& r, const Tensor& st, bool exact, Outcome& out) {
  const int64_t S = st.dim(0);
  for (size_t i = 0; i < iso.seqs.size(); ++i) {
    if (i == iso.bad) continue;
    const Seq& s = iso.seqs[i];
    Tolerance tol = iso.tol;
    if (i < iso.state_extra.size()) tol.extra_abs = iso.state_extra[i];
    compare_part(seq_name(s, i) + " final state", r.st[i], fresh_slot(st, s.slot), iso.act, tol,
                 exact, out);
  }
  for (int64_t slot = 0; slot < S; ++slot) {
    bool named = false;
    for (const Seq& s : iso.seqs)
      named = named || s.slot == slot;
    if (named) continue;
    const Tensor was = fresh_slot(r.init, slot), now = fresh_slot(st, slot);
    out.compared += was.numel();
    if (std::memcmp(was.raw(), now.raw(), was.nbytes()) != 0) {
      out.status = Outcome::Failed;
      out.detail += fmt::format("  slot {}, named by no sequence, changed\n", slot);
    }
  }
}

// Elements one run compares: the clean rows of y, the clean and the unnamed slots.
template <class Args>
int64_t per_run(Iso<Args>& iso) {
  const Tensor& st = states_of(iso.a);
  const int64_t per_slot = st.numel() / st.dim(0);
  int64_t rows = 0;
  for (size_t i = 0; i < iso.seqs.size(); ++i)
    if (i != iso.bad) rows += iso.seqs[i].len;
  // Every slot but the poisoned sequence's: the clean ones by value, the unnamed ones by bits.
  return rows * iso.a.out.dim(1) + (st.dim(0) - 1) * per_slot;
}

// The host op on the poisoned batch against itself on the clean sequences alone: bit-exact
// (its work items are per sequence).
template <class Args>
Outcome host_case(Iso<Args> iso) {
  const Ref r = reference(iso);
  run_host(iso.a);
  Outcome o;
  o.kernels = "host";
  // The poison reaches the op: the poisoned sequence's own rows come out non-finite.
  const Seq& b = iso.seqs[iso.bad];
  const Tensor bad_rows = fresh_rows(iso.a.out, b.t0, b.len);
  bool reached = false;
  for (int64_t i = 0; i < bad_rows.numel() && !reached; ++i)
    reached = !std::isfinite(load_as_f64(bad_rows.raw(), bad_rows.dtype(), static_cast<size_t>(i)));
  if (!reached) {
    o.status = Outcome::Failed;
    o.detail = "the poisoned sequence's outputs are all finite: the poison did not reach the op\n";
  }
  compare_rows(iso, r, iso.a.out, true, o);
  compare_slots(iso, r, states_of(iso.a), true, o);
  // The GPU cases' comparison by tolerance, on the same results: passes and counts alike.
  Outcome tol;
  compare_rows(iso, r, iso.a.out, false, tol);
  compare_slots(iso, r, states_of(iso.a), false, tol);
  if (tol.status != Outcome::Passed || tol.compared != o.compared) {
    o.status = Outcome::Failed;
    o.detail += fmt::format("by tolerance: compared {} (bit-exact: {}):\n{}", tol.compared,
                            o.compared, tol.detail);
  }
  if (o.status == Outcome::Passed && o.compared != per_run(iso)) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("compared {} elements, expected {}", o.compared, per_run(iso));
  }
  return o;
}

// Every CUDA kernel that takes the batch, against the single-sequence host results.
template <class Args>
Outcome gpu_case(Iso<Args> iso) {
  const Ref r = reference(iso);
  int out_idx = -1, st_idx = -1, i = 0;
  iso.a.visit([&](Tensor& t, Role) {
    if (&t == &iso.a.out) out_idx = i;
    if (&t == &states_of(iso.a)) st_idx = i;
    ++i;
  });
  Outcome mine;  // what the check compared, over all kernels
  OutputCheck check = [&](int index, const Tensor&, const Tensor& dev) -> std::string {
    Outcome one;
    if (index == out_idx)
      compare_rows(iso, r, dev, false, one);
    else if (index == st_idx)
      compare_slots(iso, r, dev, false, one);
    else
      return "skip";
    mine.compared += one.compared;
    mine.worst = std::max(mine.worst, one.worst);
    return one.status == Outcome::Failed ? one.detail : "";
  };
  Outcome o = run_case(iso.a, iso.act, Tolerance{}, {}, check);
  o.compared = mine.compared;
  o.worst = mine.worst;
  if (o.status != Outcome::Passed) return o;
  for (const std::string& k : iso.need)
    if (("," + o.kernels + ",").find("," + k + ",") == std::string::npos) {
      o.status = Outcome::Failed;
      o.detail = fmt::format("{} did not take this case (ran: {})", k, o.kernels);
      return o;
    }
  const int64_t runs = 1 + std::count(o.kernels.begin(), o.kernels.end(), ',');
  if (o.compared != runs * per_run(iso)) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("compared {} elements, expected {} kernel run(s) x {}", o.compared, runs,
                           per_run(iso));
  }
  return o;
}

// ---- building the batches ----

// Sequences of `lens` packed from row 0; slots distinct among S = B + 2 (two named by none).
inline std::vector<Seq> pack(Rng& rng, const std::vector<int32_t>& lens,
                             const std::vector<int32_t>& has_initial, int64_t slots) {
  const std::vector<int32_t> ids = distinct(rng, static_cast<int64_t>(lens.size()), slots);
  std::vector<Seq> out;
  int64_t t = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    out.push_back({t, lens[i], ids[i], has_initial[i]});
    t += lens[i];
  }
  return out;
}

// The state poison every case shares: the unnamed slots, the slots of fresh sequences (their
// old contents must be ignored) and, when `bad_state`, the poisoned sequence's own slot.
inline void poison_states(Tensor& states, const std::vector<Seq>& seqs, size_t bad,
                          bool bad_state) {
  for (int64_t slot = 0; slot < states.dim(0); ++slot) {
    bool named = false;
    for (const Seq& s : seqs)
      named = named || s.slot == slot;
    if (!named) poison_slot(states, slot);
  }
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].init == 0 || (i == bad && bad_state)) poison_slot(states, seqs[i].slot);
}

inline std::vector<int32_t> inits_of(const std::vector<Seq>& seqs) {
  std::vector<int32_t> v;
  for (const Seq& s : seqs)
    v.push_back(s.init);
  return v;
}

}  // namespace strata::opstest::isolation
