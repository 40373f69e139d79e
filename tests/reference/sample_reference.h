// The float64 reference of the sample op (written from vLLM's definitions, not from the
// kernels), and helpers to run the host op, shared by test_sample*.cpp.
//   processed: z = raw + bias; tokens in the prompt or the output: z > 0 ? z / rep : z * rep;
//              z -= frequency * count; z -= presence if count > 0   (vllm apply_penalties)
//   kept set:  p_v = exp((z_v - max z) / T); min_p keeps p_v >= min_p (max p is 1); top_k keeps
//              the k largest z; top_p keeps the shortest descending prefix whose mass reaches
//              top_p of the kept mass (vLLM's "cumsum of ascending probs > 1 - p")
//   logprobs:  log_softmax(z / T), T = 1 for greedy rows, before any mask.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/sample_plan.h"
#include "ops/sampling_math.h"
#include "reference_util.h"

namespace strata::reftest {

struct RefEntry {
  int32_t token = 0;
  int32_t count = 0;
  bool in_prompt = false;
  float bias = 0.f;
};

inline std::vector<double> ref_processed(const std::vector<float>& raw, const ops::SamplingRow& r,
                                         const std::vector<RefEntry>& entries) {
  std::vector<double> z(raw.begin(), raw.end());
  for (const RefEntry& e : entries) {
    double& x = z[static_cast<size_t>(e.token)];
    x += e.bias;
    if (e.count > 0 || e.in_prompt) x = x > 0 ? x / r.repetition_penalty : x * r.repetition_penalty;
    x -= static_cast<double>(r.frequency_penalty) * e.count;
    if (e.count > 0) x -= r.presence_penalty;
  }
  return z;
}

// Tokens ordered by z descending, ties by lower id.
inline std::vector<int32_t> ref_order(const std::vector<double>& z) {
  std::vector<int32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  return order;
}

struct RefKept {
  std::vector<int32_t> tokens;  // ascending ids
  double margin = INFINITY;     // relative distance of the closest decision to its threshold
};

inline RefKept ref_kept(const std::vector<double>& z, const ops::SamplingRow& r) {
  const std::vector<int32_t> order = ref_order(z);
  const double m = z[order[0]], T = r.temperature;
  RefKept out;
  std::vector<int32_t> cand;
  for (int32_t v : order) {
    const double p = std::exp((z[v] - m) / T);
    if (r.min_p > 0) out.margin = std::min(out.margin, std::fabs(p - r.min_p) / r.min_p);
    if (p >= r.min_p) cand.push_back(v);
  }
  if (r.top_k > 0 && static_cast<size_t>(r.top_k) < cand.size()) cand.resize(r.top_k);
  if (r.top_p < 1.f) {
    double mass = 0;
    for (int32_t v : cand)
      mass += std::exp((z[v] - m) / T);
    double cum = 0;
    for (size_t i = 0; i < cand.size(); ++i) {
      cum += std::exp((z[cand[i]] - m) / T);
      out.margin = std::min(out.margin, std::fabs(cum / mass - r.top_p));
      if (cum >= r.top_p * mass) {
        cand.resize(i + 1);
        break;
      }
    }
  }
  out.tokens = cand;
  std::sort(out.tokens.begin(), out.tokens.end());
  return out;
}

// The distribution a non-greedy row draws from: softmax of z / T over the kept set.
inline std::vector<double> ref_distribution(const std::vector<double>& z,
                                            const ops::SamplingRow& r) {
  const RefKept kept = ref_kept(z, r);
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size(), 0.0);
  double mass = 0;
  for (int32_t v : kept.tokens)
    mass += (p[v] = std::exp((z[v] - m) / r.temperature));
  for (double& x : p)
    x /= mass;
  return p;
}

inline std::vector<double> ref_logprobs(const std::vector<double>& z, const ops::SamplingRow& r) {
  const double T = r.temperature < ops::kGreedyTemperature ? 1.0 : r.temperature;
  double m = -INFINITY;
  for (double x : z)
    m = std::max(m, x / T);
  double sum = 0;
  for (double x : z)
    sum += std::exp(x / T - m);
  std::vector<double> lp(z.size());
  for (size_t v = 0; v < z.size(); ++v)
    lp[v] = z[v] / T - m - std::log(sum);
  return lp;
}

// The host op's outputs for a batch.
struct SampleOut {
  std::vector<int32_t> ids, nonfinite, rank, top_ids;
  std::vector<float> sampled_lp, top_lp;
  int64_t K = 0;
};

// Runs the host op on `logits` with `rows` and per-row entries (empty = none); logprob
// tensors are given when `K` >= 0 (K top slots), the nonfinite flag when `flag`.
inline SampleOut run_sample(const Tensor& logits, const std::vector<ops::SamplingRow>& rows,
                            const std::vector<std::vector<RefEntry>>& entries = {}, int64_t K = -1,
                            bool flag = true) {
  const int64_t B = logits.dim(0);
  ops::SampleArgs a;
  a.logits = logits;
  a.rows = rows;
  if (!entries.empty()) {
    ops::SamplingEntries se;
    for (const auto& row : entries) {
      se.begin_row();
      for (const RefEntry& e : row) {
        if (e.count > 0 || e.in_prompt) se.add_penalty_token(e.token, e.count, e.in_prompt);
        if (e.bias != 0.f) se.add_bias(e.token, e.bias);
      }
    }
    se.fill(a);
  }
  auto i32 = [](Shape s) {
    Tensor t = Tensor::empty(s, DType::I32);
    poison(t);  // -1: an unwritten slot is not a valid id
    return t;
  };
  auto f32 = [](Shape s) {
    Tensor t = Tensor::empty(s, DType::F32);
    poison(t);  // NaN
    return t;
  };
  a.ids = i32({B});
  if (flag) a.nonfinite = i32({B});
  if (K >= 0) {
    a.sampled_logprob = f32({B});
    a.sampled_rank = i32({B});
    if (K > 0) {
      a.top_ids = i32({B, K});
      a.top_logprobs = f32({B, K});
    }
  }
  OpContext ctx;
  ops::run(ctx, a);
  SampleOut o;
  auto vec = [](const Tensor& t, auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    return t.defined() ? std::vector<T>(t.data<T>(), t.data<T>() + t.numel()) : std::vector<T>{};
  };
  o.ids = vec(a.ids, static_cast<int32_t*>(nullptr));
  o.nonfinite = vec(a.nonfinite, static_cast<int32_t*>(nullptr));
  o.rank = vec(a.sampled_rank, static_cast<int32_t*>(nullptr));
  o.top_ids = vec(a.top_ids, static_cast<int32_t*>(nullptr));
  o.sampled_lp = vec(a.sampled_logprob, static_cast<float*>(nullptr));
  o.top_lp = vec(a.top_logprobs, static_cast<float*>(nullptr));
  o.K = std::max<int64_t>(K, 0);
  return o;
}

// `n` copies of one logits row.
inline Tensor repeat_row(const std::vector<float>& row, int64_t n) {
  Tensor t = Tensor::empty({n, static_cast<int64_t>(row.size())}, DType::F32);
  for (int64_t i = 0; i < n; ++i)
    std::copy(row.begin(), row.end(), t.data<float>() + i * static_cast<int64_t>(row.size()));
  return t;
}

inline std::vector<float> row_of(const Tensor& t, int64_t b) {
  const float* p = t.data<float>() + b * t.stride(0);
  return std::vector<float>(p, p + t.dim(1));
}

// Survival function of the chi-square distribution with k degrees of freedom (closed forms for
// even and odd k): the p-value of a statistic x.
inline double chi2_pvalue(double x, int k) {
  if (k % 2 == 0) {
    double term = 1, sum = 1;
    for (int i = 1; i < k / 2; ++i)
      sum += (term *= x / 2 / i);
    return std::exp(-x / 2) * sum;
  }
  double term = std::sqrt(2 * x / M_PI) * std::exp(-x / 2), sum = 0;
  for (int i = 0; i <= (k - 3) / 2; ++i) {
    sum += term;
    term *= x / (2 * i + 3);
  }
  return std::erfc(std::sqrt(x / 2)) + sum;
}

}  // namespace strata::reftest
