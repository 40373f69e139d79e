// Cases "isolation": in a batch of several sequences (packed prefill rows or decode rows), ONE
// sequence's input rows hold non-finite values (NaN, +Inf, -Inf in turn over x, B, C and dt_raw
// of ssm_scan / ssm_update, or x of conv1d_prefill / conv1d_update), sometimes its state slot
// too. Every OTHER sequence's output rows and final state must be finite and match the host op
// run on that sequence alone (a fresh copy of its rows and its slot: the reference never sees
// the poisoned rows); the poisoned sequence's rows and slot may hold anything. Why: the
// tensor-core scans load whole chunk boxes (TMA, 16-byte staging) that reach into the next
// sequence's rows, and a masked product 0 * Inf is NaN, so another request's non-finite
// activations could reach this one's outputs or state. Also poisoned: the initial state of
// every slot no sequence names (must stay bit-exact) and of each fresh (has_initial = 0)
// sequence (must be ignored). The GPU harness runs every CUDA kernel that takes a case; the
// host op is checked against itself (batch against single sequences, bit-exact) without a GPU
// (HostKernelsIsolateSequences). Select the GPU cases with STRATA_OPS_FILTER=isolation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cases_ssm.h"
#include "cases_util.h"
#include "isolation_harness.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;
using namespace isolation;

constexpr int64_t kConvK = 4;

struct SsmSpec {
  const char* name;
  int64_t Hm, P, G;
  std::vector<int32_t> lens, has_initial;  // update: lens all 1, has_initial ignored
  size_t bad;
  bool bad_state;  // the poisoned sequence's initial state too (has_initial forced to 1)
  bool aligned;    // x, B, C at 16-byte aligned columns and row stride (what cuda.ssd_wg takes)
};
constexpr int64_t kN = 128, kChunk = 128;

// x, B, C and dt_raw as column ranges of one in_proj-like row [T, width].
template <class A>
void ssm_rows(A& a, Rng& rng, const SsmSpec& s, int64_t T, DType act) {
  const int64_t xw = s.Hm * s.P, bw = s.G * kN, lead = s.aligned ? 8 : 17;
  const int64_t used = lead + xw + 2 * bw + s.Hm, width = s.aligned ? (used + 7) / 8 * 8 : used;
  const Tensor row = normal_tensor(rng, Shape{T, width}, act, 1.f);
  a.x = row.slice(1, lead, xw);
  a.B = row.slice(1, lead + xw, bw);
  a.C = row.slice(1, lead + xw + bw, bw);
  a.dt_raw = row.slice(1, lead + xw + 2 * bw, s.Hm);
}

template <class A>
void ssm_poison(Iso<A>& iso, const SsmSpec& s) {
  const Seq& b = iso.seqs[iso.bad];
  for (Tensor* t : {&iso.a.x, &iso.a.B, &iso.a.C, &iso.a.dt_raw})
    poison_rows(*t, b.t0, b.len);
  poison_states(iso.a.ssm_states, iso.seqs, iso.bad, s.bad_state);
}

template <class A>
void ssm_dims(A& a, const SsmSpec& s, int64_t slots, int64_t T, DType act, Rng& rng) {
  a.heads = s.Hm;
  a.head_dim = s.P;
  a.groups = s.G;
  a.state_size = kN;
  a.ssm_states = normal_tensor(rng, Shape{slots, s.Hm, s.P, kN}, DType::F32, 0.5f);
  a.out = Tensor::empty(Shape{T, s.Hm * s.P}, act);
}

// A case's batch (SsmSpec or ConvSpec: lens, has_initial, bad, bad_state): its sequences packed
// from row 0 over lens.size() + 2 slots and its index tensors on iso.a. Prefill: cu_seqlens,
// slots and has_initial (forced to 1 for a poisoned state); decode (one row per sequence):
// slots, every state continued.
struct Packed {
  int64_t rows, slots;
};
template <class A, class Spec>
Packed pack_batch(Iso<A>& iso, const Spec& s, DType act, Rng& rng) {
  constexpr bool kPrefill = requires {
    iso.a.cu_seqlens;
  };
  iso.act = act;
  iso.bad = s.bad;
  const int64_t slots = static_cast<int64_t>(s.lens.size()) + 2;
  std::vector<int32_t> init = kPrefill ? s.has_initial : std::vector<int32_t>(s.lens.size(), 1);
  if (kPrefill && s.bad_state) init[s.bad] = 1;
  iso.seqs = pack(rng, s.lens, init, slots);
  std::vector<int32_t> cu{0}, ids;
  for (const Seq& q : iso.seqs) {
    cu.push_back(static_cast<int32_t>(q.t0 + q.len));
    ids.push_back(static_cast<int32_t>(q.slot));
  }
  iso.a.slots = i32_tensor(ids);
  if constexpr (kPrefill) {
    iso.a.cu_seqlens = i32_tensor(cu);
    iso.a.has_initial = i32_tensor(inits_of(iso.seqs));
  }
  return {iso.seqs.back().t0 + iso.seqs.back().len, slots};
}

// What the scan and the update cases share: the batch packed, then its rows, parameters and
// dims drawn (in that order: the same random draws).
template <class A>
Iso<A> ssm_batch(const SsmSpec& s, DType act, Rng& rng) {
  Iso<A> iso;
  const Packed b = pack_batch(iso, s, act, rng);
  ssm_rows(iso.a, rng, s, b.rows, act);
  ssm_params(iso.a, rng, s.Hm, DType::F32);
  ssm_dims(iso.a, s, b.slots, b.rows, act, rng);
  return iso;
}

Iso<SsmScanArgs> make_scan(const SsmSpec& s, DType act, Rng& rng) {
  Iso<SsmScanArgs> iso = ssm_batch<SsmScanArgs>(s, act, rng);
  SsmScanArgs& a = iso.a;
  a.chunk_size = kChunk;
  // The tolerance of the clean sequences (the decay term from their own dt only).
  iso.tol = ssm_tolerance(kChunk, kN);
  for (size_t i = 0; i < iso.seqs.size(); ++i)
    if (i != iso.bad)
      iso.tol.extra_rel =
          std::max(iso.tol.extra_rel, scan_decay_rel(single(a, iso.seqs[i]), {s.lens[i]}));
  add_bf16_operand_rounding(iso.tol, act);
  if (act == DType::BF16) {
    iso.state_extra.resize(iso.seqs.size());
    for (size_t i = 0; i < iso.seqs.size(); ++i)
      if (i != iso.bad)
        iso.state_extra[i] = state_rounding_bound(a, iso.seqs[i].t0, iso.seqs[i].len);
  }
  ssm_poison(iso, s);
  iso.need = {"cuda"};
  if (act == DType::BF16) {
    for (const char* k : {"cuda.ssd_mma", "cuda.ssd_fused", "cuda.ssd_chain"})
      iso.need.emplace_back(k);
    if (s.aligned)  // the wgmma kernels (both take every aligned bf16 case; defers is ignored)
      for (const char* k : {"cuda.ssd_wg", "cuda.ssd_seq"})
        iso.need.emplace_back(k);
  }
  return iso;
}

Iso<SsmUpdateArgs> make_update(const SsmSpec& s, DType act, Rng& rng) {
  Iso<SsmUpdateArgs> iso = ssm_batch<SsmUpdateArgs>(s, act, rng);
  iso.tol = ssm_tolerance(1, kN);
  ssm_poison(iso, s);
  iso.need = {"cuda"};
  return iso;
}

struct ConvSpec {
  const char* name;
  int64_t C;
  std::vector<int32_t> lens, has_initial;  // update: lens all 1, has_initial ignored
  size_t bad;
  bool bad_state;
};

// A conv1d case (prefill or update, by A) over its packed batch.
template <class A>
Iso<A> make_conv(const ConvSpec& s, DType act, Rng& rng) {
  Iso<A> iso;
  const Packed p = pack_batch(iso, s, act, rng);
  A& a = iso.a;
  a.x = wide_rows(rng, p.rows, s.C, 64, 24, act, 1.f);
  a.weight = normal_tensor(rng, Shape{s.C, kConvK}, act, 0.5f);
  a.bias = normal_tensor(rng, Shape{s.C}, act, 0.5f);
  a.conv_states = normal_tensor(rng, Shape{p.slots, kConvK - 1, s.C}, act, 1.f);
  a.out = Tensor::empty(Shape{p.rows, s.C}, act);
  iso.tol.reduction = kConvK + 1;  // K products and the bias; silu's exp
  iso.tol.math = 1;
  const Seq& b = iso.seqs[iso.bad];
  poison_rows(a.x, b.t0, b.len);
  poison_states(a.conv_states, iso.seqs, iso.bad, s.bad_state);
  iso.need = {"cuda"};
  return iso;
}

// ---- the table ----

// One case in both modes: on the GPU (every CUDA kernel) or the host op against itself.
struct IsoCase {
  std::string op, label;
  std::function<Outcome(Rng&, bool host)> run;
};

template <class Spec, class Make>
IsoCase iso_case(const char* op, std::string label, Spec s, DType act, Make make) {
  return {op, "isolation: " + label + " " + dt(act), [s, act, make](Rng& rng, bool host) {
            auto iso = make(s, act, rng);
            return host ? host_case(std::move(iso)) : gpu_case(std::move(iso));
          }};
}

std::string spec_label(const char* name, const std::vector<int32_t>& lens,
                       const std::vector<int32_t>& init, size_t bad, bool bad_state) {
  return fmt::format("{} lens {} has_initial {} poisoned #{}{}", name, fmt::join(lens, ","),
                     fmt::join(init, ","), bad, bad_state ? " (rows and state)" : " (rows)");
}

const std::vector<IsoCase>& iso_cases() {
  static const std::vector<IsoCase> all = [] {
    std::vector<IsoCase> out;
    // Odd lengths: sequences start mid-box (37, 165, 365, 366) and end mid-box; the poisoned
    // one first, in the middle (after a partial box), the one-token one and last.
    const std::vector<int32_t> lens5{37, 128, 200, 1, 300}, init5{1, 0, 1, 1, 0};
    std::vector<SsmSpec> scans;
    for (size_t bad = 0; bad < lens5.size(); ++bad)
      scans.push_back(
          {"nano3 dims 8 heads", 8, Nano3::head_dim, 4, lens5, init5, bad, bad == 2, true});
    scans.push_back({"nano3 dims 8 heads", 8, Nano3::head_dim, 4, lens5, init5, 1, true, false});
    // Several sequences inside one 128-row box around the poisoned one.
    scans.push_back({"nano3 dims 8 heads, short",
                     8,
                     Nano3::head_dim,
                     2,
                     {5, 3, 7, 2, 100},
                     {1, 0, 1, 0, 1},
                     2,
                     false,
                     true});
    scans.push_back(
        {"nano3", Nano3::heads, Nano3::head_dim, Nano3::groups, lens5, init5, 1, true, true});
    const std::vector<int32_t> lens9{129, 1, 250, 37}, init9{0, 1, 1, 1};
    for (size_t bad : {size_t{0}, size_t{1}, size_t{3}})
      scans.push_back(
          {"9b dims 8 heads", 8, Nano9B::head_dim, 2, lens9, init9, bad, bad == 1, true});
    for (const SsmSpec& s : scans)
      for (DType act : acts())
        out.push_back(iso_case("ssm_scan",
                               spec_label(s.name, s.lens, s.has_initial, s.bad, s.bad_state) +
                                   fmt::format(" heads={}x{} groups={}{}", s.Hm, s.P, s.G,
                                               s.aligned ? " aligned" : ""),
                               s, act, make_scan));

    const std::vector<SsmSpec> updates = {
        {"nano3",
         Nano3::heads,
         Nano3::head_dim,
         Nano3::groups,
         {1, 1, 1, 1, 1},
         {},
         0,
         false,
         true},
        {"nano3",
         Nano3::heads,
         Nano3::head_dim,
         Nano3::groups,
         {1, 1, 1, 1, 1},
         {},
         2,
         true,
         false},
        {"nano3",
         Nano3::heads,
         Nano3::head_dim,
         Nano3::groups,
         {1, 1, 1, 1, 1},
         {},
         4,
         false,
         true},
        {"9b", Nano9B::heads, Nano9B::head_dim, Nano9B::groups, {1, 1, 1}, {}, 1, true, true},
    };
    for (const SsmSpec& s : updates)
      for (DType act : acts())
        out.push_back(
            iso_case("ssm_update",
                     fmt::format("{} B={} poisoned #{}{} heads={}x{}", s.name, s.lens.size(), s.bad,
                                 s.bad_state ? " (rows and state)" : " (rows)", s.Hm, s.P),
                     s, act, make_update));

    std::vector<ConvSpec> prefills;
    for (size_t bad : {size_t{0}, size_t{1}, size_t{3}, size_t{4}})
      prefills.push_back({"nano3", Nano3::conv_dim, lens5, init5, bad, bad == 1});
    // Runs of 16 tokens crossing several short sequences (the bf16 run kernel).
    prefills.push_back(
        {"9b runs", Nano9B::conv_dim, {1, 2, 3, 15, 16, 33, 1}, {1, 0, 1, 1, 0, 1, 1}, 3, true});
    prefills.push_back(
        {"9b runs", Nano9B::conv_dim, {1, 2, 3, 15, 16, 33, 1}, {1, 0, 1, 1, 0, 1, 1}, 1, false});
    for (const ConvSpec& s : prefills)
      for (DType act : acts())
        out.push_back(iso_case("conv1d_prefill",
                               spec_label(s.name, s.lens, s.has_initial, s.bad, s.bad_state) +
                                   fmt::format(" C={}", s.C),
                               s, act, make_conv<Conv1dPrefillArgs>));

    const std::vector<ConvSpec> conv_updates = {
        {"nano3", Nano3::conv_dim, {1, 1, 1, 1, 1}, {}, 0, false},
        {"nano3", Nano3::conv_dim, {1, 1, 1, 1, 1}, {}, 2, true},
        {"9b", Nano9B::conv_dim, {1, 1, 1}, {}, 2, false},
    };
    for (const ConvSpec& s : conv_updates)
      for (DType act : acts())
        out.push_back(
            iso_case("conv1d_update",
                     fmt::format("{} C={} B={} poisoned #{}{}", s.name, s.C, s.lens.size(), s.bad,
                                 s.bad_state ? " (rows and state)" : " (rows)"),
                     s, act, make_conv<Conv1dUpdateArgs>));
    return out;
  }();
  return all;
}

std::vector<OpCase> gpu_cases() {
  std::vector<OpCase> out;
  for (const IsoCase& c : iso_cases()) {
    const auto* p = &c;
    out.push_back({c.op, c.label, true, [p](Rng& rng) { return p->run(rng, false); }});
  }
  return out;
}

// The host kernels on the same batches, each against itself on the clean sequences alone.
TEST(OpHarness, HostKernelsIsolateSequences) {
  int64_t n = 0, elements = 0;
  for (const IsoCase& c : iso_cases()) {
    Rng rng(0x150 + static_cast<uint64_t>(n));
    Outcome o;
    try {
      o = c.run(rng, true);
    } catch (const std::exception& e) {
      o.status = Outcome::Failed;
      o.detail = std::string("threw: ") + e.what();
    }
    EXPECT_EQ(o.status, Outcome::Passed) << c.op << " | " << c.label << "\n" << o.detail;
    EXPECT_GT(o.compared, 0) << c.op << " | " << c.label;
    elements += o.compared;
    ++n;
  }
  std::printf("host isolation: %lld cases, %lld elements compared bit for bit\n",
              static_cast<long long>(n), static_cast<long long>(elements));
  EXPECT_EQ(n, 48);
}

}  // namespace

STRATA_OP_CASES(gpu_cases);

}  // namespace strata::opstest
