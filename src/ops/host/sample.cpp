// Host sampler: the reference the CUDA sampler is checked against (the op harness demands the
// same token for every row), with the arithmetic of ops/sampling_math.h. Per row b:
//   1. raw logits with a NaN or an infinity: id -1, nonfinite 1.
//   2. z = processed logits (plain_logit, or processed_logit for the row's sparse entries);
//      all -inf: id -1, nonfinite 2.
//   3. greedy: argmax z (lowest id on ties).
//      race (temperature, min_p at most): argmax over tokens with s_v >= log(min_p) of
//      race_value(z_v) (ties: lower id).
//      sorted (top_k or top_p): tokens passing min_p, ordered by z descending (ties by id),
//      the first top_k, then the shortest prefix whose mass sum exp(s_v) (f64, in order)
//      reaches top_p of the kept mass; the race over that prefix.
//   4. logprobs: z' = z / T (T = 1 for greedy rows), lse = max z' + log sum exp(z' - max z')
//      in f64; the sampled token's z' - lse and its rank #{v : z'_v >= z'_sampled}; the top k
//      by z' (ties by id).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/host/sample_host.h"
#include "ops/ops.h"
#include "ops/sample_plan.h"
#include "ops/sampling_math.h"

namespace strata::ops::host {
namespace {

bool sample_supports(const SampleArgs& a, std::string* why) {
  ArgCheck c("sample", why);
  bool ok = c.host(a.logits, "logits") && c.host(a.ids, "ids");
  SampleArgs handles = a;  // visit() is not const; tensors are handles
  handles.visit([&](Tensor& t, Role) { ok = ok && c.host(t, "every tensor of the op"); });
  if (!ok) return false;
  if (!c.that(a.logits.rank() == 2, "logits must be 2-D [B, V]")) return false;
  return c.dtype_in(a.logits, "logits", {DType::F32}) &&
         c.rows(a.logits, "logits", a.logits.dim(0), a.logits.dim(1));
}

// One row's sparse entries.
struct RowEntries {
  const int32_t* tokens = nullptr;
  const int32_t* counts = nullptr;
  const int32_t* in_prompt = nullptr;
  const float* bias = nullptr;
  int64_t n = 0;
};

struct RowResult {
  int32_t id = -1;
  int32_t status = 0;  // 0 sampled, 1 non-finite raw logits, 2 every token banned
  float sampled_logprob = 0.f;
  int32_t sampled_rank = 0;
};

// z (processed logits) of one row; returns the status.
int32_t process_row(const float* raw, int64_t V, const SamplingRow& r, const RowEntries& e,
                    std::vector<float>& z) {
  for (int64_t v = 0; v < V; ++v)
    if (!std::isfinite(raw[v])) return 1;
  z.resize(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v)
    z[v] = plain_logit(raw[v]);
  for (int64_t i = 0; i < e.n; ++i) {
    const int32_t t = e.tokens[i];
    z[t] = processed_logit(raw[t], e.bias[i], e.counts[i], e.in_prompt[i] != 0, r.presence_penalty,
                           r.frequency_penalty, r.repetition_penalty);
  }
  return 0;
}

int64_t argmax(const std::vector<float>& z) {
  int64_t best = 0;
  for (int64_t v = 1; v < static_cast<int64_t>(z.size()); ++v)
    if (z[v] > z[best]) best = v;
  return best;
}

}  // namespace

int64_t sample_kept_tokens(const std::vector<float>& z, float m, const SamplingRow& r,
                           std::vector<int32_t>& order) {
  const int64_t V = static_cast<int64_t>(z.size());
  const float T = r.temperature, lmp = log_min_p(r.min_p);
  order.clear();
  for (int64_t v = 0; v < V; ++v)
    if (scaled_logit(z[v], m, T) >= lmp) order.push_back(static_cast<int32_t>(v));
  int64_t kept = static_cast<int64_t>(order.size());  // >= 1: the maximum passes
  if (sample_path(r.temperature, r.top_k, r.top_p) == kPathRace) return kept;
  const auto before = [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  if (r.top_k > 0 && r.top_k < kept) {
    std::partial_sort(order.begin(), order.begin() + r.top_k, order.end(), before);
    kept = r.top_k;
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  if (r.top_p < 1.f) {
    double mass = 0;
    for (int64_t i = 0; i < kept; ++i)
      mass += std::exp(static_cast<double>(scaled_logit(z[order[i]], m, T)));
    const double need = static_cast<double>(r.top_p) * mass;
    double cum = 0;
    for (int64_t i = 0; i < kept; ++i) {
      cum += std::exp(static_cast<double>(scaled_logit(z[order[i]], m, T)));
      if (cum >= need) {
        kept = i + 1;
        break;
      }
    }
  }
  return kept;
}

namespace {

int32_t draw(const std::vector<float>& z, float m, const SamplingRow& r,
             std::vector<int32_t>& order) {
  const int64_t kept = sample_kept_tokens(z, m, r, order);
  const uint64_t key = sampling_bits(r.seed, r.step);
  double best = -INFINITY;
  int32_t best_v = -1;
  for (int64_t i = 0; i < kept; ++i) {
    const int32_t v = order[i];
    const double x = race_value(z[v], r.temperature, key, v);
    if (best_v < 0 || x > best || (x == best && v < best_v)) {
      best = x;
      best_v = v;
    }
  }
  return best_v;
}

// Logprob outputs of a sampled row; `top_ids` / `top_lp` hold K slots (null when K = 0).
void logprobs(const std::vector<float>& z, const SamplingRow& r, RowResult& out,
              std::vector<int32_t>& order, int32_t* top_ids, float* top_lp) {
  const int64_t V = static_cast<int64_t>(z.size());
  const bool greedy = sample_path(r.temperature, r.top_k, r.top_p) == kPathGreedy;
  const float T = greedy ? 1.f : r.temperature;
  std::vector<float> zs(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v)
    zs[v] = div_rn(z[v], T);
  const double m = zs[argmax(zs)];
  double sum = 0;
  for (int64_t v = 0; v < V; ++v)
    sum += std::exp(static_cast<double>(zs[v]) - m);
  const double lse = m + std::log(sum);
  const float zs_id = zs[out.id];
  out.sampled_logprob = static_cast<float>(static_cast<double>(zs_id) - lse);
  out.sampled_rank = 0;
  for (int64_t v = 0; v < V; ++v)
    out.sampled_rank += zs[v] >= zs_id ? 1 : 0;
  const int64_t k = std::min<int64_t>(r.num_logprobs, V);
  if (k <= 0) return;
  order.resize(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return zs[a] > zs[b] || (zs[a] == zs[b] && a < b);
  });
  for (int64_t i = 0; i < k; ++i) {
    top_ids[i] = order[i];
    top_lp[i] = static_cast<float>(static_cast<double>(zs[order[i]]) - lse);
  }
}

RowResult sample_row(const float* raw, int64_t V, const SamplingRow& r, const RowEntries& e,
                     std::vector<float>& z, std::vector<int32_t>& order, int32_t* top_ids,
                     float* top_lp) {
  RowResult out;
  out.status = process_row(raw, V, r, e, z);
  if (out.status != 0) return out;
  const int64_t best = argmax(z);
  if (z[best] == -INFINITY) {
    out.status = 2;
    return out;
  }
  out.id = sample_path(r.temperature, r.top_k, r.top_p) == kPathGreedy ? static_cast<int32_t>(best)
                                                                       : draw(z, z[best], r, order);
  if (r.num_logprobs >= 0) logprobs(z, r, out, order, top_ids, top_lp);
  return out;
}

void sample_run(const SampleArgs& a, OpContext&) {
  check_sample_args(a, /*host_entries=*/true);
  const RowsView logits(a.logits);
  const int64_t B = logits.rows, V = logits.cols;
  const int64_t K = a.top_ids.defined() ? a.top_ids.dim(1) : 0;
  const bool has_entries = a.entry_offsets.defined();
  std::vector<RowResult> results(static_cast<size_t>(B));
  if (K > 0) {
    std::fill_n(a.top_ids.data<int32_t>(), B * K, -1);
    std::fill_n(a.top_logprobs.data<float>(), B * K, 0.f);
  }
  parallel_for(B, [&](int64_t b0, int64_t b1) {
    std::vector<float> row(static_cast<size_t>(V)), z;
    std::vector<int32_t> order;
    for (int64_t b = b0; b < b1; ++b) {
      logits.load(b, row.data());
      RowEntries e;
      if (has_entries) {
        const int32_t* off = a.entry_offsets.data<int32_t>();
        e = {a.entry_tokens.data<int32_t>() + off[b], a.entry_counts.data<int32_t>() + off[b],
             a.entry_in_prompt.data<int32_t>() + off[b], a.entry_bias.data<float>() + off[b],
             off[b + 1] - off[b]};
      }
      results[b] = sample_row(row.data(), V, a.rows[static_cast<size_t>(b)], e, z, order,
                              K > 0 ? a.top_ids.data<int32_t>() + b * K : nullptr,
                              K > 0 ? a.top_logprobs.data<float>() + b * K : nullptr);
    }
  });
  for (int64_t b = 0; b < B; ++b) {
    const RowResult& r = results[b];
    if (r.status != 0 && !a.nonfinite.defined()) {
      if (r.status == 1) fail("sample: logits row {} holds a NaN or an infinity", b);
      fail("sample: every token of row {} is banned (all processed logits are -inf)", b);
    }
    a.ids.data<int32_t>()[b] = r.id;
    if (a.nonfinite.defined()) a.nonfinite.data<int32_t>()[b] = r.status;
    if (a.sampled_logprob.defined()) {
      a.sampled_logprob.data<float>()[b] = r.sampled_logprob;
      a.sampled_rank.data<int32_t>()[b] = r.sampled_rank;
    }
  }
}

}  // namespace

STRATA_REGISTER_KERNEL(SampleArgs, "host", Device::Host, sample_supports, sample_run);

}  // namespace strata::ops::host
