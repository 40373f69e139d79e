// Shapes and helpers shared by the case tables (cases_*.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "harness.h"

namespace strata::opstest {

// The real model shapes the harness must cover (spec/nemotron_h.md 1.4).
struct Nano3 {
  static constexpr int64_t hidden = 2688, in_proj = 10304, d_inner = 4096, conv_dim = 6144;
  static constexpr int64_t heads = 64, head_dim = 64, groups = 8, state = 128;
  static constexpr int64_t q_heads = 32, kv_heads = 2, attn_dim = 128;
  static constexpr int64_t experts = 128, top_k = 6, expert_width = 1856, shared_width = 3712;
  static constexpr int64_t vocab = 131072;
};
struct Nano9B {
  static constexpr int64_t hidden = 4480, in_proj = 22656, d_inner = 10240, conv_dim = 12288;
  static constexpr int64_t heads = 128, head_dim = 80, groups = 8, state = 128;
  static constexpr int64_t q_heads = 40, kv_heads = 8, attn_dim = 128, mlp = 15680;
};

inline const std::vector<DType>& acts() {
  static const std::vector<DType> a{DType::F32, DType::BF16};
  return a;
}

inline std::string dt(DType t) {
  return std::string(dtype_name(t));
}

// k distinct values of [0, n), in random order.
std::vector<int32_t> distinct(Rng& rng, int64_t k, int64_t n);

// The sequence layout, dims and state slots of an ssm_scan case (the inputs and parameters are
// each table's own): packed sequences of `lens` tokens, `slots` state slots of random f32
// initial states [slots, Hm, P, N] (normal, sigma 0.5), one distinct random slot per sequence,
// has_initial per sequence, and y [T, Hm * P] of `act`.
struct ScanLayout {
  int64_t Hm, P, G, N, chunk, slots;
};
void set_scan_layout(ops::SsmScanArgs& a, Rng& rng, const ScanLayout& s,
                     const std::vector<int32_t>& lens, const std::vector<int32_t>& has_initial,
                     DType act);

// The device preparation of a moe_experts case: device copies of the experts (visit() does not
// list them), kept alive in `keep` for the case.
using MoeDevicePrep =
    std::function<void(ops::MoeExpertsArgs&, std::vector<std::shared_ptr<void>>&)>;
MoeDevicePrep experts_to_device(std::shared_ptr<const std::vector<ops::LinearWeight>> up,
                                std::shared_ptr<const std::vector<ops::LinearWeight>> down);

}  // namespace strata::opstest
