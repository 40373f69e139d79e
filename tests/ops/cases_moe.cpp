// Cases: moe_route (Nano-3's 128 experts top-6, group-limited routing, Super's 512 top-22) and
// moe_experts (FP8 decode, decode, swapped and tiled grouped kernels; bf16, f32, FP8 W8A16 and
// W8A8; the harness runs every kernel that supports a case) including
// the full Nano-3 expert shapes, T = 1..8 for the decode kernels and widths that are multiples
// of 16 but not of the FP8 kernel's 64-value chunks.
#include <algorithm>
#include <cmath>
#include <set>

#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

struct RouteS {
  const char* name;
  int64_t T, E, k, n_group, topk_group;
  bool norm;
  float scale;
};

// Selection scores in double (the order both kernels must agree on, up to f32 rounding).
double sel_score(const Tensor& logits, const Tensor& bias, int64_t t, int32_t e) {
  const double l = logits.data<float>()[t * logits.stride(0) + e];
  return 1.0 / (1.0 + std::exp(-l)) + bias.data<float>()[e];
}

Outcome run_route(const RouteS& s, Rng& rng) {
  MoeRouteArgs a;
  a.logits = normal_tensor(rng, Shape{s.T, s.E}, DType::F32, 2.f);
  a.correction_bias = uniform_tensor(rng, Shape{s.E}, DType::F32, -0.3f, 0.3f);
  a.top_k = s.k;
  a.n_group = s.n_group;
  a.topk_group = s.topk_group;
  a.norm_topk_prob = s.norm;
  a.routed_scaling_factor = s.scale;
  a.ids = Tensor::empty(Shape{s.T, s.k}, DType::I32);
  a.weights = Tensor::empty(Shape{s.T, s.k}, DType::F32);
  const Tensor logits = a.logits, bias = a.correction_bias;
  // ids must match; a swap is accepted only at a near tie of the selection scores (within f32
  // rounding of the sigmoid: 1e-6), and then that row's weights are not compared.
  auto swapped = std::make_shared<std::set<int64_t>>();
  OutputCheck check = [=](int index, const Tensor& host, const Tensor& dev) -> std::string {
    if (index == 2) {
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t j = 0; j < s.k; ++j) {
          const int32_t h = host.data<int32_t>()[t * s.k + j], d = dev.data<int32_t>()[t * s.k + j];
          if (h == d) continue;
          if (d < 0 || d >= s.E)
            return fmt::format("token {} slot {}: device id {} out of range", t, j, d);
          const double gap =
              std::fabs(sel_score(logits, bias, t, h) - sel_score(logits, bias, t, d));
          if (gap > 1e-6)
            return fmt::format(
                "token {} slot {}: device expert {} host expert {} (selection gap {:.3g})", t, j, d,
                h, gap);
          swapped->insert(t);
        }
      return "";
    }
    if (index == 3 && !swapped->empty()) {
      for (int64_t t = 0; t < s.T; ++t) {
        if (swapped->count(t)) continue;
        for (int64_t j = 0; j < s.k; ++j) {
          const float h = host.data<float>()[t * s.k + j], d = dev.data<float>()[t * s.k + j];
          if (!(std::fabs(h - d) <= 1e-5f * std::fabs(h) + 1e-7f))
            return fmt::format("token {} slot {}: weight {} vs host {}", t, j, d, h);
        }
      }
      return "";
    }
    return "skip";
  };
  Tolerance tol;  // weights: k-term renormalization sum, sigmoid's exp
  tol.reduction = s.k;
  tol.math = 1;
  return run_case(a, DType::F32, tol, {}, check);
}

std::vector<OpCase> route_cases() {
  const RouteS shapes[] = {
      {"nano3", 1, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 17, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 300, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"group-limited", 17, 64, 6, 8, 4, true, 1.f},
      {"no renorm", 3, 40, 3, 1, 1, false, 1.5f},
      {"super", 3, 512, 22, 1, 1, true, 5.f},
      // The warp kernel's (cuda.warp, from 64 tokens) odd token counts, its 8-per-lane form
      // (E = 200: padded lanes) and groups that are all kept (no masking).
      {"nano3", 2, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 3, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 255, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 4097, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"nano3", 64, Nano3::experts, Nano3::top_k, 1, 1, true, 2.5f},
      {"200 experts", 65, 200, 8, 1, 1, true, 1.f},
      {"all groups kept", 70, 64, 6, 4, 4, true, 1.f}};
  std::vector<OpCase> out;
  for (const RouteS& s : shapes)
    out.push_back({"moe_route",
                   fmt::format("{} T={} E={} top{} groups {}/{}{} scale {}", s.name, s.T, s.E, s.k,
                               s.topk_group, s.n_group, s.norm ? "" : " no-renorm", s.scale),
                   true, [s](Rng& rng) { return run_route(s, rng); }});
  return out;
}

enum class WK { Act, Fp8W8A16, Fp8W8A8 };

struct ExpS {
  const char* name;
  int64_t T, E, k, H, I;
  DType act;
  WK kind;
  bool skewed = false;  // slot 0 of every token routes to expert 0 (one expert gets all tokens)
};

Outcome run_experts(const ExpS& s, Rng& rng) {
  MoeExpertsArgs a;
  auto up = std::make_shared<std::vector<LinearWeight>>(static_cast<size_t>(s.E));
  auto down = std::make_shared<std::vector<LinearWeight>>(static_cast<size_t>(s.E));
  const float sup = 1.f / std::sqrt(static_cast<float>(s.H)),
              sdown = 1.f / std::sqrt(static_cast<float>(s.I));
  for (int64_t e = 0; e < s.E; ++e) {
    LinearWeight& u = (*up)[static_cast<size_t>(e)];
    LinearWeight& d = (*down)[static_cast<size_t>(e)];
    if (s.kind == WK::Act) {
      // Uniform with the wanted standard deviation (sqrt(3) * sd bounds): cheap for 1.3 GB.
      u.weight = uniform_tensor(rng, Shape{s.I, s.H}, s.act, -1.732f * sup, 1.732f * sup);
      d.weight = uniform_tensor(rng, Shape{s.H, s.I}, s.act, -3.464f * sdown, 3.464f * sdown);
    } else {
      u.weight = fp8_weight(rng, Shape{s.I, s.H}, sup, &u.weight_scale);
      d.weight = fp8_weight(rng, Shape{s.H, s.I}, sdown * 2.f, &d.weight_scale);
      if (s.kind == WK::Fp8W8A8) {
        // Calibrated as ModelOpt does, scale = amax / 448: x ~ N(0, 1) stays within 5;
        // h = relu(u)^2 with u ~ N(0, 1) within 16.
        u.input_scale = 5.f / 448.f;
        d.input_scale = 16.f / 448.f;
      }
    }
  }
  a.x = normal_tensor(rng, Shape{s.T, s.H}, s.act, 1.f);
  a.up = up.get();
  a.down = down.get();
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < s.T; ++t) {
    std::vector<int32_t> row = distinct(rng, s.k, s.E);
    if (s.skewed) {  // expert 0 first, the other slots keep distinct experts
      auto zero = std::find(row.begin(), row.end(), 0);
      if (zero != row.end())
        std::swap(*zero, row.front());
      else
        row.front() = 0;
    }
    ids.insert(ids.end(), row.begin(), row.end());
  }
  a.ids = i32_tensor(ids, Shape{s.T, s.k});
  a.weights = uniform_tensor(rng, Shape{s.T, s.k}, DType::F32, 0.1f, 1.f);
  a.out = Tensor::empty(Shape{s.T, s.H}, s.act);
  const MoeDevicePrep to_device = experts_to_device(up, down);
  Tolerance tol;
  tol.reduction = s.H + s.I;     // the up sum over H, the down sum over I
  tol.roundings = 1;             // the combined output
  tol.roundings_before_sum = 3;  // u, h (feed the down sum) and d (feeds the weighted sum)
  if (s.kind == WK::Fp8W8A8) {
    // The host reference is W8A16: x and h are not quantized there. e4m3 rounds each
    // activation by at most u = 2^-4 relative (rms u / sqrt(3)); x's error reaches h doubled
    // (relu^2), so the output's relative L2 error is about u * sqrt(1/3 + 4/3 + 1/3) ~ 1.4 u.
    tol.rel_l2 = 2 * unit_roundoff(DType::F8E4M3);
  }
  return run_case(
      a, s.act, tol,
      to_device);
}

std::string kind_name(WK k) {
  return k == WK::Act ? "act" : k == WK::Fp8W8A16 ? "fp8 W8A16" : "fp8 W8A8";
}

std::vector<OpCase> experts_cases() {
  const DType bf = DType::BF16, f32 = DType::F32;
  const int64_t E = Nano3::experts, k = Nano3::top_k, H = Nano3::hidden, I = Nano3::expert_width;
  const ExpS shapes[] = {
      {"nano3", 1, E, k, H, I, bf, WK::Act},
      {"nano3", 1, E, k, H, I, bf, WK::Fp8W8A8},
      {"nano3", 3, E, k, H, I, bf, WK::Fp8W8A16},
      {"nano3", 17, E, k, H, I, bf, WK::Fp8W8A8},
      {"nano3 widths, 16 experts", 130, 16, k, H, I, bf, WK::Act},
      {"nano3 widths, 16 experts", 2, 16, k, H, I, bf, WK::Fp8W8A16},
      {"nano3 widths, 16 experts", 5, 16, k, H, I, bf, WK::Fp8W8A8},
      {"nano3 widths, 16 experts", 8, 16, k, H, I, bf, WK::Fp8W8A8},
      // The streamed FP8 kernel's rings wrapping (H200): up at 8 rows per block with 10 slices
      // of 512 bytes through 8 slots, down at 16 rows with 6 slices through 4.
      {"stream ring", 2, 5, 2, 4624, 2576, bf, WK::Fp8W8A8},
      {"aligned odd", 3, 5, 2, 272, 208, bf, WK::Fp8W8A8},
      {"aligned odd", 7, 5, 2, 272, 208, bf, WK::Fp8W8A16},
      {"small", 300, 16, 4, 256, 192, bf, WK::Act},
      {"odd", 3, 5, 2, 131, 67, bf, WK::Act},
      {"odd", 17, 5, 2, 131, 67, bf, WK::Fp8W8A16},
      {"f32", 3, 8, 2, 64, 48, f32, WK::Act},
      {"f32", 33, 8, 2, 64, 48, f32, WK::Act},
      // Many-token shapes for the grouped kernels (tensor-core GEMMs: 64-pair tiles, 128
      // features, k in 128-byte stages): an expert with more than one tile, experts with none,
      // row counts that are not multiples of 16, feature and k tails.
      {"nano3", 33, E, k, H, I, bf, WK::Act},
      {"nano3", 33, E, k, H, I, bf, WK::Fp8W8A8},
      {"2 tokens, 128 experts", 2, E, k, 256, 192, bf, WK::Fp8W8A8},
      {"skewed", 255, 16, 4, 256, 192, bf, WK::Act, true},
      {"skewed", 255, 16, 4, 256, 192, bf, WK::Fp8W8A8, true},
      {"skewed tails", 97, 5, 2, 272, 208, bf, WK::Fp8W8A8, true},
      {"skewed tails", 97, 5, 2, 272, 208, bf, WK::Act, true},
      {"many tokens", 4097, 16, 2, 256, 192, bf, WK::Act},
      {"many tokens", 4097, 16, 2, 256, 192, bf, WK::Fp8W8A8},
      // The swapped grouped GEMMs (weights on mma's M side, 32 pairs per block, 1..4 n8 tiles;
      // up to 4096 tokens): few pairs per expert on the Nano-3 shapes, ~12 per expert over 128,
      // and the largest T they take.
      {"nano3", 2, E, k, H, I, bf, WK::Act},
      {"nano3", 3, E, k, H, I, bf, WK::Fp8W8A8},
      {"nano3", 17, E, k, H, I, bf, WK::Act},
      {"128 experts", 255, E, k, 256, 192, bf, WK::Fp8W8A8},
      {"128 experts", 255, E, k, 256, 192, bf, WK::Act},
      {"many tokens", 4096, 16, 2, 256, 192, bf, WK::Fp8W8A8},
  };
  std::vector<OpCase> out;
  for (const ExpS& s : shapes)
    out.push_back(
        {"moe_experts",
         fmt::format("{} T={} E={} top{} H={} I={} {} {}{}", s.name, s.T, s.E, s.k, s.H, s.I,
                     dt(s.act), kind_name(s.kind), s.skewed ? " (expert 0 in every token)" : ""),
         true, [s](Rng& rng) { return run_experts(s, rng); }});
  return out;
}

std::vector<OpCase> all() {
  std::vector<OpCase> out = route_cases();
  for (auto& c : experts_cases())
    out.push_back(std::move(c));
  return out;
}

}  // namespace

STRATA_OP_CASES(all);

}  // namespace strata::opstest
