// Host MoE: routing (spec 3.5) and the routed experts.
//
// moe_route, per token (all f32):
//   s = sigmoid(logits); sel = s + correction_bias             (bias chooses, never weighs)
//   n_group > 1: group score = sum of the two largest sel of the group; the topk_group best
//                groups stay (ties: lower group), the others' experts are excluded
//   ids = top_k experts by sel, descending (ties: lower index)
//   weights = s[ids] / sum(s[ids]) (if norm_topk_prob; no epsilon, as vLLM) * routed_scaling_factor
//
// moe_experts, per token t and selected expert j (e = ids[t, j]):
//   u = act(up_e . x_t); u = act(relu(u)^2); d_j = act(down_e . u)
//   out[t] = act(sum_j weights[t, j] * d_j)       (f32 sum in j order)
// Tokens are grouped by expert so each expert's weight rows are converted once per block of
// tokens; each d_j is computed by one thread and the final sum runs in j order, so results do
// not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/host/weight_rows.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

bool moe_route_supports(const MoeRouteArgs& a, std::string* why) {
  ArgCheck c("moe_route", why);
  if (!(c.host(a.logits, "logits") && c.host(a.ids, "ids") && c.host(a.weights, "weights")))
    return false;
  if (a.correction_bias.defined() && !c.host(a.correction_bias, "correction_bias")) return false;
  if (!c.that(a.logits.rank() == 2, "logits must be 2-D [T, E]")) return false;
  const int64_t T = a.logits.dim(0), E = a.logits.dim(1);
  if (!(c.dtype_in(a.logits, "logits", {DType::F32}) && c.rows(a.logits, "logits", T, E)))
    return false;
  if (a.correction_bias.defined() &&
      !(c.dtype_in(a.correction_bias, "correction_bias", {DType::F32}) &&
        c.vec(a.correction_bias, "correction_bias", E)))
    return false;
  if (a.n_group < 1 || E % a.n_group != 0)
    return c.fail("n_group {} must be >= 1 and divide E = {}", a.n_group, E);
  if (a.topk_group < 1 || a.topk_group > a.n_group)
    return c.fail("topk_group {} must be in [1, n_group = {}]", a.topk_group, a.n_group);
  const int64_t group_size = E / a.n_group;
  if (a.n_group > 1 && group_size < 2)
    return c.fail("groups of {} expert(s) have no top-2 score", group_size);
  if (a.top_k < 1 || a.top_k > a.topk_group * group_size)
    return c.fail("top_k {} must be in [1, {}] (experts of the kept groups)", a.top_k,
                  a.topk_group * group_size);
  if (!std::isfinite(a.routed_scaling_factor)) return c.fail("routed_scaling_factor is not finite");
  return c.dtype_in(a.ids, "ids", {DType::I32}) &&
         c.that(a.ids.is_contiguous(), "ids must be contiguous") &&
         c.dtype_in(a.weights, "weights", {DType::F32}) &&
         c.that(a.weights.is_contiguous(), "weights must be contiguous") &&
         c.that(a.ids.rank() == 2 && a.ids.dim(0) == T && a.ids.dim(1) == a.top_k,
                "ids must be [T, top_k]") &&
         c.that(a.weights.rank() == 2 && a.weights.dim(0) == T && a.weights.dim(1) == a.top_k,
                "weights must be [T, top_k]");
}

// Indices of the k largest values (descending; ties: lower index first) among `allowed`.
void top_k_indices(const std::vector<float>& v, const std::vector<char>& allowed, int64_t k,
                   std::vector<int32_t>& out) {
  out.clear();
  for (size_t i = 0; i < v.size(); ++i)
    if (allowed[i]) out.push_back(static_cast<int32_t>(i));
  const auto better = [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  std::partial_sort(out.begin(), out.begin() + k, out.end(), better);
  out.resize(static_cast<size_t>(k));
}

void moe_route_run(const MoeRouteArgs& a, OpContext&) {
  const RowsView logits(a.logits);
  const int64_t T = logits.rows, E = logits.cols, K = a.top_k, gs = E / a.n_group;
  const std::vector<float> bias = a.correction_bias.defined()
                                      ? load_vector(a.correction_bias)
                                      : std::vector<float>(static_cast<size_t>(E), 0.f);
  auto* ids = a.ids.data<int32_t>();
  auto* weights = a.weights.data<float>();
  parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(static_cast<size_t>(E)), sel(static_cast<size_t>(E)),
        group_score(static_cast<size_t>(a.n_group));
    std::vector<char> allowed(static_cast<size_t>(E)),
        all_groups(static_cast<size_t>(a.n_group), 1);
    std::vector<int32_t> pick, groups;
    for (int64_t t = t0; t < t1; ++t) {
      logits.load(t, s.data());
      for (int64_t e = 0; e < E; ++e) {
        if (std::isnan(s[e])) fail("moe_route: logits[{}, {}] is NaN", t, e);
        s[e] = sigmoid(s[e]);
        sel[e] = s[e] + bias[e];
      }
      std::fill(allowed.begin(), allowed.end(), 1);
      if (a.n_group > 1) {
        for (int64_t g = 0; g < a.n_group; ++g) {
          const float* sg = sel.data() + g * gs;
          float first = -INFINITY, second = -INFINITY;
          for (int64_t i = 0; i < gs; ++i) {
            if (sg[i] > first) {
              second = first;
              first = sg[i];
            } else if (sg[i] > second) {
              second = sg[i];
            }
          }
          group_score[g] = first + second;
        }
        top_k_indices(group_score, all_groups, a.topk_group, groups);
        std::fill(allowed.begin(), allowed.end(), 0);
        for (int32_t g : groups)
          std::fill(allowed.begin() + g * gs, allowed.begin() + (g + 1) * gs, 1);
      }
      top_k_indices(sel, allowed, K, pick);
      float sum = 0.f;
      for (int32_t e : pick)
        sum += s[e];
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = pick[static_cast<size_t>(j)];
        const float w = a.norm_topk_prob ? s[e] / sum : s[e];
        ids[t * K + j] = e;
        weights[t * K + j] = w * a.routed_scaling_factor;
      }
    }
  });
}

bool moe_experts_supports(const MoeExpertsArgs& a, std::string* why) {
  ArgCheck c("moe_experts", why);
  if (!(c.host(a.x, "x") && c.host(a.ids, "ids") && c.host(a.weights, "weights") &&
        c.host(a.out, "out")))
    return false;
  if (!a.up || !a.down || a.up->empty() || a.up->size() != a.down->size())
    return c.fail("up and down must list the same number (>= 1) of expert weights");
  if (!c.that(a.x.rank() == 2, "x must be 2-D [T, H]")) return false;
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  const int64_t I =
      (*a.up)[0].weight.defined() && (*a.up)[0].weight.rank() == 2 ? (*a.up)[0].weight.dim(0) : -1;
  for (size_t e = 0; e < a.up->size(); ++e) {
    const std::string up_name = fmt::format("up[{}]", e), down_name = fmt::format("down[{}]", e);
    if (!(weight_supported(c, (*a.up)[e], up_name.c_str(), I, H) &&
          weight_supported(c, (*a.down)[e], down_name.c_str(), H, I)))
      return false;
  }
  if (!c.that(a.ids.rank() == 2 && a.ids.dim(0) == T, "ids must be [T, top_k]")) return false;
  const int64_t K = a.ids.dim(1);
  return c.float_act(a.x, "x") && c.rows(a.x, "x", T, H) &&
         c.dtype_in(a.ids, "ids", {DType::I32}) &&
         c.that(a.ids.is_contiguous(), "ids must be contiguous") &&
         c.dtype_in(a.weights, "weights", {DType::F32}) &&
         c.that(a.weights.is_contiguous() && a.weights.rank() == 2 && a.weights.dim(0) == T &&
                    a.weights.dim(1) == K,
                "weights must be contiguous [T, top_k]") &&
         c.float_act(a.out, "out") && c.rows(a.out, "out", T, H);
}

// One expert applied to its assigned (token, j) pairs of a token block; results go to
// d[(pair's row in the block) * K + j][:] (act-rounded values kept in f32).
void run_expert(const LinearWeight& up, const LinearWeight& down, const std::vector<int32_t>& pairs,
                int64_t K, int64_t t_begin, const std::vector<float>& xs, DType act,
                std::vector<float>& d) {
  const int64_t H = up.in_features(), I = up.out_features(), n = static_cast<int64_t>(pairs.size());
  std::vector<float> u(static_cast<size_t>(n * I)), row(static_cast<size_t>(std::max(H, I)));
  const float up_scale = weight_output_scale(up), down_scale = weight_output_scale(down);
  for (int64_t i = 0; i < I; ++i) {
    load_weight_row(up, i, row.data());
    for (int64_t p = 0; p < n; ++p) {
      const int64_t t = pairs[static_cast<size_t>(p)] / K - t_begin;
      u[p * I + i] = round_to(act, dot_f32(xs.data() + t * H, row.data(), H) * up_scale);
    }
  }
  for (float& v : u)
    v = round_to(act, v > 0.f ? v * v : 0.f);
  for (int64_t h = 0; h < H; ++h) {
    load_weight_row(down, h, row.data());
    for (int64_t p = 0; p < n; ++p) {
      const int64_t slot = pairs[static_cast<size_t>(p)] - t_begin * K;  // (t - t_begin) * K + j
      d[slot * H + h] = round_to(act, dot_f32(u.data() + p * I, row.data(), I) * down_scale);
    }
  }
}

void moe_experts_run(const MoeExpertsArgs& a, OpContext&) {
  constexpr int64_t kTokenBlock = 256;  // bounds the [block, top_k, H] scratch of expert outputs
  const RowsView x(a.x), out(a.out);
  const int64_t T = x.rows, H = x.cols, K = a.ids.dim(1), E = static_cast<int64_t>(a.up->size());
  const int32_t* ids = a.ids.data<int32_t>();
  const float* weights = a.weights.data<float>();
  for (int64_t i = 0; i < T * K; ++i)
    if (ids[i] < 0 || ids[i] >= E)
      fail("moe_experts: ids[{}, {}] = {} is outside the {} experts", i / K, i % K, ids[i], E);
  const DType act = out.dtype;
  for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
    const int64_t tn = std::min(kTokenBlock, T - t0);
    std::vector<float> xs(static_cast<size_t>(tn * H)), d(static_cast<size_t>(tn * K * H));
    for (int64_t t = 0; t < tn; ++t)
      x.load(t0 + t, xs.data() + t * H);
    // (token * K + j) pairs per expert, in token order.
    std::vector<std::vector<int32_t>> pairs(static_cast<size_t>(E));
    for (int64_t i = t0 * K; i < (t0 + tn) * K; ++i)
      pairs[static_cast<size_t>(ids[i])].push_back(static_cast<int32_t>(i));
    std::vector<int32_t> active;
    for (int64_t e = 0; e < E; ++e)
      if (!pairs[static_cast<size_t>(e)].empty()) active.push_back(static_cast<int32_t>(e));
    parallel_for(
        static_cast<int64_t>(active.size()),
        [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            const size_t e = static_cast<size_t>(active[static_cast<size_t>(i)]);
            run_expert((*a.up)[e], (*a.down)[e], pairs[e], K, t0, xs, act, d);
          }
        },
        1);
    parallel_for(tn, [&](int64_t r0, int64_t r1) {
      std::vector<float> acc(static_cast<size_t>(H));
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j = 0; j < K; ++j) {
          const float w = weights[(t0 + r) * K + j];
          const float* dj = d.data() + (r * K + j) * H;
          for (int64_t h = 0; h < H; ++h)
            acc[h] += w * dj[h];
        }
        out.store(t0 + r, acc.data());
      }
    });
  }
}

}  // namespace

STRATA_REGISTER_KERNEL(MoeRouteArgs, "host", Device::Host, moe_route_supports, moe_route_run);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, "host", Device::Host, moe_experts_supports, moe_experts_run);

}  // namespace strata::ops::host
