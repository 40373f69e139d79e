// Host paged KV cache write and causal GQA attention over the paged cache (spec 3.3; no RoPE).
//
// kv_cache_write: token t's K/V rows go to block slot_mapping[t] / block_size, offset
// slot_mapping[t] % block_size; negative slots are padding and skipped. A cache in f8e4m3
// stores e4m3(k / k_scale) (and v / v_scale) saturated to +-448, vLLM's scaled fp8 cache; the
// scales are ignored for caches of other dtypes. Attention reads an e4m3 value as
// f32(code) * k_scale (v_scale).
//
// attention: query i of sequence b (context position p = context_len - q_len + i), head h,
// kv head h / (n_heads / n_kv_heads):
//   s_j = scale * (q . k_j) for j = 0..p;  m = max_j s_j;  e_j = exp(s_j - m)
//   out = act( (sum_j e_j v_j) / (sum_j e_j) )                      (all f32)
// vLLM's flash kernels round the unnormalized probabilities to bf16 before the P.V product;
// this reference keeps them in f32 (the difference is inside the bf16 output band).
// Work items are (token, head): each owns one output segment.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

bool cache_dtype(ArgCheck& c, const Tensor& t, const char* name) {
  return c.dtype_in(t, name, {DType::F32, DType::BF16, DType::F16, DType::F8E4M3});
}

// k_cache / v_cache: [num_blocks, block_size, n_kv, hd], contiguous below the block index.
bool caches_supported(ArgCheck& c, const Tensor& k_cache, const Tensor& v_cache) {
  if (!(c.host(k_cache, "k_cache") && c.host(v_cache, "v_cache"))) return false;
  if (!c.that(k_cache.rank() == 4, "k_cache must be 4-D [num_blocks, block_size, n_kv, hd]"))
    return false;
  const int64_t nb = k_cache.dim(0), bs = k_cache.dim(1), nkv = k_cache.dim(2), hd = k_cache.dim(3);
  return cache_dtype(c, k_cache, "k_cache") && cache_dtype(c, v_cache, "v_cache") &&
         c.inner_contiguous(k_cache, "k_cache", {nb, bs, nkv, hd}) &&
         c.inner_contiguous(v_cache, "v_cache", {nb, bs, nkv, hd}) &&
         c.that(bs >= 1, "block_size must be >= 1");
}

bool scales_ok(ArgCheck& c, float k_scale, float v_scale) {
  return c.that(std::isfinite(k_scale) && k_scale > 0.f && std::isfinite(v_scale) && v_scale > 0.f,
                "k_scale and v_scale must be finite and > 0");
}

// Stores n values into a cache row; f8e4m3 stores e4m3(v / scale), saturated as vLLM's scaled
// fp8 conversion does.
void store_cache_row(void* dst, DType dtype, int64_t n, const float* src, float scale) {
  if (dtype != DType::F8E4M3) return store_f32(dst, dtype, n, src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i)
    d[i] = fp8e4m3_from_f32_sat(src[i] / scale);
}

// Loads n values of a cache row as f32 (e4m3 codes times their scale).
void load_cache_row(const void* src, DType dtype, int64_t n, float scale, float* dst) {
  load_f32(src, dtype, n, dst);
  if (dtype != DType::F8E4M3) return;
  for (int64_t i = 0; i < n; ++i)
    dst[i] *= scale;
}

bool kv_cache_write_supports(const KvCacheWriteArgs& a, std::string* why) {
  ArgCheck c("kv_cache_write", why);
  if (!(c.host(a.k, "k") && c.host(a.v, "v") && c.host(a.slot_mapping, "slot_mapping")))
    return false;
  if (!caches_supported(c, a.k_cache, a.v_cache) || !scales_ok(c, a.k_scale, a.v_scale))
    return false;
  if (!c.that(a.k.rank() == 2, "k must be 2-D [T, n_kv*hd]")) return false;
  const int64_t T = a.k.dim(0), width = a.k_cache.dim(2) * a.k_cache.dim(3);
  return c.float_act(a.k, "k") && c.rows(a.k, "k", T, width) && c.float_act(a.v, "v") &&
         c.rows(a.v, "v", T, width) && c.index_vec(a.slot_mapping, "slot_mapping", T);
}

void kv_cache_write_run(const KvCacheWriteArgs& a, OpContext&) {
  const std::vector<int32_t> slots = load_indices(a.slot_mapping);
  const int64_t bs = a.k_cache.dim(1), capacity = a.k_cache.dim(0) * bs;
  std::vector<bool> seen(static_cast<size_t>(capacity), false);
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    if (slots[t] >= capacity)
      fail("kv_cache_write: slot_mapping[{}] = {} is outside the cache of {} blocks x {}", t,
           slots[t], a.k_cache.dim(0), bs);
    if (seen[static_cast<size_t>(slots[t])])
      fail("kv_cache_write: cache slot {} is written twice in one step", slots[t]);
    seen[static_cast<size_t>(slots[t])] = true;
  }
  const RowsView k(a.k), v(a.v);
  parallel_for(static_cast<int64_t>(slots.size()), [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(k.cols));
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t s = slots[static_cast<size_t>(t)];
      if (s < 0) continue;
      k.load(t, row.data());
      store_cache_row(element_ptr(a.k_cache, {s / bs, s % bs, 0, 0}), a.k_cache.dtype(), k.cols,
                      row.data(), a.k_scale);
      v.load(t, row.data());
      store_cache_row(element_ptr(a.v_cache, {s / bs, s % bs, 0, 0}), a.v_cache.dtype(), v.cols,
                      row.data(), a.v_scale);
    }
  });
}

bool attention_supports(const AttentionArgs& a, std::string* why) {
  ArgCheck c("attention", why);
  if (!(c.host(a.q, "q") && c.host(a.out, "out") && c.host(a.block_tables, "block_tables") &&
        c.host(a.cu_seqlens_q, "cu_seqlens_q") && c.host(a.context_lens, "context_lens")))
    return false;
  if (!caches_supported(c, a.k_cache, a.v_cache) || !scales_ok(c, a.k_scale, a.v_scale))
    return false;
  if (a.n_heads < 1 || a.n_kv_heads < 1 || a.head_dim < 1 || a.n_heads % a.n_kv_heads != 0)
    return c.fail("n_heads {} must be a multiple of n_kv_heads {} (both >= 1), head_dim {} >= 1",
                  a.n_heads, a.n_kv_heads, a.head_dim);
  if (a.k_cache.dim(2) != a.n_kv_heads || a.k_cache.dim(3) != a.head_dim)
    return c.fail("caches {} do not hold {} kv heads of dim {}", a.k_cache.str(), a.n_kv_heads,
                  a.head_dim);
  if (!c.that(a.q.rank() == 2, "q must be 2-D [T, n_heads*hd]")) return false;
  const int64_t T = a.q.dim(0), width = a.n_heads * a.head_dim;
  if (!c.that(a.block_tables.rank() == 2, "block_tables must be 2-D [B, max_blocks]")) return false;
  const int64_t B = a.block_tables.dim(0);
  if (T > 0 && a.max_q_len < 1)
    return c.fail("max_q_len {} must be >= 1 (the longest query of the step)", a.max_q_len);
  return c.float_act(a.q, "q") && c.rows(a.q, "q", T, width) && c.float_act(a.out, "out") &&
         c.rows(a.out, "out", T, width) &&
         c.dtype_in(a.block_tables, "block_tables", {DType::I32}) &&
         c.that(a.block_tables.is_contiguous(), "block_tables must be contiguous") &&
         c.index_vec(a.cu_seqlens_q, "cu_seqlens_q", B + 1) &&
         c.index_vec(a.context_lens, "context_lens", B);
}

// Validates the per-sequence metadata against the cache before any work starts.
void check_attention_indices(const AttentionArgs& a, const std::vector<int32_t>& cu,
                             const std::vector<int32_t>& ctx_lens,
                             const std::vector<int32_t>& tables) {
  check_cu_seqlens("attention", "cu_seqlens_q", cu, a.q.dim(0));
  const int64_t bs = a.k_cache.dim(1), nb = a.k_cache.dim(0), maxb = a.block_tables.dim(1);
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    const int64_t q_len = cu[b + 1] - cu[b], ctx = ctx_lens[b];
    if (q_len > ctx)
      fail("attention: sequence {} has {} queries but a context of {}", b, q_len, ctx);
    if (q_len > a.max_q_len)
      fail("attention: sequence {} has {} queries, above max_q_len {}", b, q_len, a.max_q_len);
    if (ctx > maxb * bs)
      fail("attention: context_lens[{}] = {} exceeds its block table ({} blocks of {})", b, ctx,
           maxb, bs);
    for (int64_t j = 0; j < (ctx + bs - 1) / bs; ++j) {
      const int32_t blk = tables[static_cast<size_t>(static_cast<int64_t>(b) * maxb + j)];
      if (blk < 0 || blk >= nb)
        fail("attention: block_tables[{}, {}] = {} is outside the {} cache blocks", b, j, blk, nb);
    }
  }
}

void attention_run(const AttentionArgs& a, OpContext&) {
  const std::vector<int32_t> cu = load_indices(a.cu_seqlens_q),
                             ctx_lens = load_indices(a.context_lens);
  const std::vector<int32_t> tables = load_indices(a.block_tables);
  check_attention_indices(a, cu, ctx_lens, tables);
  const RowsView q(a.q), out(a.out);
  const int64_t T = q.rows, Hq = a.n_heads, hd = a.head_dim, bs = a.k_cache.dim(1),
                maxb = a.block_tables.dim(1);
  const int64_t group = a.n_heads / a.n_kv_heads;
  // Sequence of each token (tokens are packed in sequence order).
  std::vector<int32_t> seq_of(static_cast<size_t>(T));
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    for (int32_t t = cu[b]; t < cu[b + 1]; ++t)
      seq_of[static_cast<size_t>(t)] = static_cast<int32_t>(b);
  parallel_for(T * Hq, [&](int64_t i0, int64_t i1) {
    std::vector<float> qv(static_cast<size_t>(hd)), kv(static_cast<size_t>(hd)),
        acc(static_cast<size_t>(hd));
    std::vector<float> scores;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / Hq, h = item % Hq, kvh = h / group;
      const size_t b = static_cast<size_t>(seq_of[static_cast<size_t>(t)]);
      const int64_t q_len = cu[b + 1] - cu[b], pos = ctx_lens[b] - q_len + (t - cu[b]);
      const int32_t* table = tables.data() + static_cast<int64_t>(b) * maxb;
      q.load(t, h * hd, hd, qv.data());
      scores.resize(static_cast<size_t>(pos + 1));
      float m = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        load_cache_row(element_ptr(a.k_cache, {table[j / bs], j % bs, kvh, 0}), a.k_cache.dtype(),
                       hd, a.k_scale, kv.data());
        scores[static_cast<size_t>(j)] = a.scale * dot_f32(qv.data(), kv.data(), hd);
        m = std::max(m, scores[static_cast<size_t>(j)]);
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      float denom = 0.f;
      for (int64_t j = 0; j <= pos; ++j) {
        const float e = std::exp(scores[static_cast<size_t>(j)] - m);
        denom += e;
        load_cache_row(element_ptr(a.v_cache, {table[j / bs], j % bs, kvh, 0}), a.v_cache.dtype(),
                       hd, a.v_scale, kv.data());
        for (int64_t d = 0; d < hd; ++d)
          acc[d] += e * kv[d];
      }
      for (float& v : acc)
        v /= denom;
      out.store(t, h * hd, hd, acc.data());
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(KvCacheWriteArgs, "host", Device::Host, kv_cache_write_supports,
                       kv_cache_write_run);
STRATA_REGISTER_KERNEL(AttentionArgs, "host", Device::Host, attention_supports, attention_run);

}  // namespace strata::ops::host
