// Host sampler. Per row b with parameters rows[b]:
//   temperature == 0: argmax of the logits (lowest index on ties).
//   otherwise: order the vocabulary by logit, descending (ties: lower index first); keep the
//   first top_k (0 = all); p_i = exp((l_i - l_max) / temperature) (f32) over the kept tokens;
//   top_p < 1 keeps the shortest prefix whose mass reaches top_p * mass (always >= 1 token);
//   draw u = philox_or_splitmix(seed, step) in [0, 1) and return the first kept token, in the
//   same order, whose cumulative mass exceeds u * kept mass (masses summed in f64).
// A device kernel that walks the same order with the same u draws the same token, up to
// rounding at the exact boundaries between tokens.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"
#include "ops/sampling_rng.h"

namespace strata::ops::host {
namespace {

bool sample_supports(const SampleArgs& a, std::string* why) {
  ArgCheck c("sample", why);
  if (!(c.host(a.logits, "logits") && c.host(a.ids, "ids"))) return false;
  if (!c.that(a.logits.rank() == 2, "logits must be 2-D [B, V]")) return false;
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
  if (static_cast<int64_t>(a.rows.size()) != B)
    return c.fail("{} sampling rows for {} logits rows", a.rows.size(), B);
  return c.dtype_in(a.logits, "logits", {DType::F32}) && c.rows(a.logits, "logits", B, V) &&
         c.that(V >= 1, "the vocabulary must not be empty") && c.index_vec(a.ids, "ids", B);
}

void check_row(const SamplingRow& r, size_t b) {
  if (!(std::isfinite(r.temperature) && r.temperature >= 0.f))
    fail("sample: row {} has temperature {}; it must be finite and >= 0", b, r.temperature);
  if (r.top_k < 0) fail("sample: row {} has top_k {}; it must be >= 0 (0 = off)", b, r.top_k);
  if (!(r.top_p > 0.f && r.top_p <= 1.f))
    fail("sample: row {} has top_p {}; it must be in (0, 1]", b, r.top_p);
}

// The finite maximum of a row (first index among equals); throws on NaN or no finite maximum.
int64_t argmax_row(const float* l, int64_t V, size_t b) {
  int64_t best = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (std::isnan(l[i])) fail("sample: logits[{}, {}] is NaN", b, i);
    if (l[i] > l[best]) best = i;
  }
  if (!std::isfinite(l[best])) fail("sample: logits row {} has no finite maximum ({})", b, l[best]);
  return best;
}

int32_t sample_row(const float* l, int64_t V, const SamplingRow& r, std::vector<int32_t>& order,
                   std::vector<float>& p) {
  order.resize(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  int64_t kept = r.top_k > 0 ? std::min<int64_t>(r.top_k, V) : V;
  if (kept < V)
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), before);
  else
    std::sort(order.begin(), order.end(), before);
  const float m = l[order[0]];
  p.resize(static_cast<size_t>(kept));
  double mass = 0;
  for (int64_t i = 0; i < kept; ++i)
    mass += (p[i] = std::exp((l[order[i]] - m) / r.temperature));
  if (r.top_p < 1.f) {
    const double need = static_cast<double>(r.top_p) * mass;
    double cum = 0;
    for (int64_t i = 0; i < kept; ++i) {
      cum += p[i];
      if (cum >= need) {
        kept = i + 1;
        break;
      }
    }
    mass = cum;
  }
  const double target = static_cast<double>(philox_or_splitmix(r.seed, r.step)) * mass;
  double cum = 0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < kept; ++i) {
    if (p[i] <= 0.f) continue;
    last_positive = i;
    cum += p[i];
    if (target < cum) return order[i];
  }
  return order[last_positive];  // unreachable in exact arithmetic: target < mass
}

void sample_run(const SampleArgs& a, OpContext&) {
  const RowsView logits(a.logits);
  const int64_t B = logits.rows, V = logits.cols;
  for (size_t b = 0; b < a.rows.size(); ++b)
    check_row(a.rows[b], b);
  int32_t* ids = a.ids.data<int32_t>();
  parallel_for(B, [&](int64_t b0, int64_t b1) {
    std::vector<float> row(static_cast<size_t>(V)), p;
    std::vector<int32_t> order;
    for (int64_t b = b0; b < b1; ++b) {
      logits.load(b, row.data());
      const SamplingRow& r = a.rows[static_cast<size_t>(b)];
      const int64_t best =
          argmax_row(row.data(), V, static_cast<size_t>(b));  // also validates the row
      ids[b] = r.temperature == 0.f ? static_cast<int32_t>(best)
                                    : sample_row(row.data(), V, r, order, p);
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(SampleArgs, "host", Device::Host, sample_supports, sample_run);

}  // namespace strata::ops::host
