// Host kv_cache_write and paged causal GQA attention against float64 attention over
// contiguous K/V, with shuffled block tables, prefill, chunked-prefill and decode queries in
// one packed batch.
//
// Band for attention (first-order): a score s_j = scale * q.k_j has f32 error
// ds_j <= (hd + 2) 2^-24 scale sum|q k_j|; a softmax weight then moves by at most
// 2 p_j max_j ds_j; the weighted sum of V adds (ctx + 8) roundings of sum_j p_j |v_j| (sums,
// exp, divide); the output is stored in act once (u_act of |o|).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "reference_util.h"

namespace strata::reftest {
namespace {

struct AttnSeq {
  int32_t q_len, ctx;
};

struct AttnCase {
  int64_t n_heads, n_kv, hd, block_size, num_blocks;
  DType act;
  std::vector<AttnSeq> seqs;
  float scale;
};

struct AttnSetup {
  // Per sequence: contiguous K and V [ctx, n_kv, hd] (the reference) and its block table.
  std::vector<Tensor> K, V;
  Tensor k_cache, v_cache, block_tables;
  std::vector<int32_t> cu;
  int64_t max_blocks = 0;
};

// Places every sequence's K/V into the caches through its block table; `shuffle` draws the
// blocks in random order (as a block pool hands them out), else consecutively.
AttnSetup make_setup(const AttnCase& c, bool shuffle, std::mt19937_64& rng, uint64_t data_seed) {
  AttnSetup s;
  std::mt19937_64 data(data_seed);  // K/V values independent of the block order
  for (const auto& q : c.seqs)
    s.max_blocks = std::max<int64_t>(s.max_blocks, (q.ctx + c.block_size - 1) / c.block_size);
  s.k_cache = Tensor::empty({c.num_blocks, c.block_size, c.n_kv, c.hd}, c.act);
  s.v_cache = Tensor::empty({c.num_blocks, c.block_size, c.n_kv, c.hd}, c.act);
  poison(s.k_cache);
  poison(s.v_cache);
  std::vector<int32_t> blocks(static_cast<size_t>(c.num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  if (shuffle) std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<int32_t> table(
      static_cast<size_t>(static_cast<int64_t>(c.seqs.size()) * s.max_blocks), -7);
  size_t next = 0;
  s.cu = {0};
  for (size_t b = 0; b < c.seqs.size(); ++b) {
    const int64_t ctx = c.seqs[b].ctx;
    s.K.push_back(random_tensor({ctx, c.n_kv, c.hd}, c.act, data));
    s.V.push_back(random_tensor({ctx, c.n_kv, c.hd}, c.act, data));
    for (int64_t j = 0; j < (ctx + c.block_size - 1) / c.block_size; ++j)
      table[b * s.max_blocks + j] = blocks.at(next++);
    for (int64_t p = 0; p < ctx; ++p) {
      const int64_t blk = table[b * s.max_blocks + p / c.block_size], off = p % c.block_size;
      for (int64_t g = 0; g < c.n_kv; ++g)
        for (int64_t d = 0; d < c.hd; ++d) {
          set(s.k_cache, {blk, off, g, d}, get(s.K[b], {p, g, d}));
          set(s.v_cache, {blk, off, g, d}, get(s.V[b], {p, g, d}));
        }
    }
    s.cu.push_back(s.cu.back() + c.seqs[b].q_len);
  }
  s.block_tables = Tensor::empty({static_cast<int64_t>(c.seqs.size()), s.max_blocks}, DType::I32);
  std::memcpy(s.block_tables.raw(), table.data(), table.size() * sizeof(int32_t));
  return s;
}

Tensor run_attention(const AttnCase& c, const AttnSetup& s, const Tensor& q, int64_t max_q_len) {
  const int64_t T = q.dim(0);
  ops::AttentionArgs a;
  a.q = q;
  a.k_cache = s.k_cache;
  a.v_cache = s.v_cache;
  a.block_tables = s.block_tables;
  a.cu_seqlens_q = i32_tensor(s.cu);
  std::vector<int32_t> ctx;
  for (const auto& sq : c.seqs)
    ctx.push_back(sq.ctx);
  a.context_lens = i32_tensor(ctx);
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv;
  a.head_dim = c.hd;
  a.max_q_len = max_q_len;
  a.scale = c.scale;
  a.out = Tensor::empty({T, c.n_heads * c.hd}, c.act);
  poison(a.out);
  OpContext octx;
  ops::run(octx, a);
  return a.out;
}

void run_attention_case(const AttnCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("heads {} kv {} hd {} bs {} act {}", c.n_heads, c.n_kv, c.hd,
                           c.block_size, dtype_name(c.act)));
  std::mt19937_64 rng(seed);
  const AttnSetup paged = make_setup(c, true, rng, seed + 1000);
  const AttnSetup contiguous = make_setup(c, false, rng, seed + 1000);
  const int64_t T = paged.cu.back();
  int64_t max_q = 0;
  for (const auto& sq : c.seqs)
    max_q = std::max<int64_t>(max_q, sq.q_len);
  // q is a column range of a wider qkv projection output.
  WideRows qkv = wide_rows(T, c.n_heads * c.hd, 2 * c.n_kv * c.hd, 0, c.act);
  fill_normal(qkv.wide, rng);
  const Tensor out = run_attention(c, paged, qkv.view, max_q);
  const Tensor out_contig = run_attention(c, contiguous, qkv.view, max_q);

  const int64_t group = c.n_heads / c.n_kv;
  Comparison cmp, same;
  for (size_t b = 0; b < c.seqs.size(); ++b)
    for (int64_t i = 0; i < c.seqs[b].q_len; ++i) {
      const int64_t t = paged.cu[b] + i, pos = c.seqs[b].ctx - c.seqs[b].q_len + i;
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const int64_t g = h / group;
        std::vector<double> s(static_cast<size_t>(pos + 1));
        double m = -INFINITY, ds_max = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          double dot = 0, mag = 0;
          for (int64_t d = 0; d < c.hd; ++d) {
            const double p = get(qkv.view, {t, h * c.hd + d}) * get(paged.K[b], {j, g, d});
            dot += p;
            mag += std::fabs(p);
          }
          s[j] = c.scale * dot;
          m = std::max(m, s[j]);
          ds_max = std::max(ds_max, f32_band(std::fabs(c.scale) * mag, c.hd + 2));
        }
        double denom = 0;
        for (auto& v : s)
          denom += (v = std::exp(v - m));
        for (int64_t d = 0; d < c.hd; ++d) {
          double o = 0, mag = 0;
          for (int64_t j = 0; j <= pos; ++j) {
            const double v = get(paged.V[b], {j, g, d});
            o += s[j] / denom * v;
            mag += s[j] / denom * std::fabs(v);
          }
          const double tol =
              mag * (2 * ds_max + static_cast<double>(pos + 9) * std::ldexp(1.0, -24)) +
              unit_roundoff(c.act) * std::fabs(o);
          const int64_t col = h * c.hd + d;
          cmp.check(get(out, {t, col}), o, tol,
                    fmt::format("seq {} q {} head {} d {}", b, i, h, d));
          // Same arithmetic in the same order, only the blocks moved: identical bits.
          same.check(get(out, {t, col}), get(out_contig, {t, col}), 0.0,
                     fmt::format("paged vs contiguous t {} col {}", t, col));
        }
      }
    }
  EXPECT_EQ(cmp.compared, T * c.n_heads * c.hd);
  EXPECT_EQ(cmp.failed, 0);
  EXPECT_EQ(same.compared, T * c.n_heads * c.hd);
  EXPECT_EQ(same.failed, 0);
}

TEST(HostAttention, PagedGqaMatchesFloat64) {
  const std::vector<AttnSeq> mixed = {
      {1, 1}, {5, 5}, {3, 11}, {1, 9}, {4, 16}};  // decode, prefill, chunked
  const AttnCase cases[] = {
      {4, 2, 8, 4, 24, DType::F32, mixed, 0.35f},
      {4, 2, 8, 4, 24, DType::BF16, mixed, 0.35f},
      {6, 1, 5, 3, 40, DType::BF16, mixed, 1.0f / std::sqrt(5.0f)},     // one kv head (MQA), odd hd
      {3, 3, 16, 16, 6, DType::F32, {{2, 20}, {1, 1}, {7, 7}}, 0.25f},  // MHA, blocks larger than
                                                                        // queries
      {2, 1, 4, 1, 64, DType::F32, {{3, 30}, {1, 17}}, 0.5f},           // block_size 1
  };
  uint64_t seed = 300;
  for (const auto& c : cases)
    run_attention_case(c, seed++);
}

TEST(HostAttention, BadMetadataFailsWithMessages) {
  std::mt19937_64 rng(310);
  const AttnCase c{2, 1, 4, 4, 4, DType::F32, {{2, 6}}, 0.5f};
  AttnSetup s = make_setup(c, false, rng, 1);
  Tensor q = random_tensor({2, 8}, DType::F32, rng);
  EXPECT_THROW(run_attention(c, s, q, 1), Error);  // q_len 2 above max_q_len 1
  EXPECT_THROW(run_attention(c, s, q, 0), Error);  // max_q_len unset
  AttnCase too_long = c;
  too_long.seqs = {{2, 9}};  // context beyond its 2-block table
  EXPECT_THROW(run_attention(too_long, s, q, 2), Error);
  AttnCase more_q = c;
  more_q.seqs = {{2, 1}};  // more queries than context
  AttnSetup s2 = make_setup(more_q, false, rng, 2);
  EXPECT_THROW(run_attention(more_q, s2, q, 2), Error);
  static_cast<int32_t*>(s.block_tables.raw())[1] = 4;  // block index outside the cache
  EXPECT_THROW(run_attention(c, s, q, 2), Error);
}

void run_kv_write_case(int64_t T, int64_t nkv, int64_t hd, int64_t bs, int64_t nb, DType act,
                       DType cache, uint64_t seed, float k_scale = 1.f, float v_scale = 1.f) {
  SCOPED_TRACE(fmt::format("T={} nkv={} hd={} bs={} act={} cache={} scales {} {}", T, nkv, hd, bs,
                           dtype_name(act), dtype_name(cache), k_scale, v_scale));
  std::mt19937_64 rng(seed);
  WideRows kv = wide_rows(T, 2 * nkv * hd, 3, 3, act);  // k | v are column ranges of one qkv row
  fill_normal(kv.wide, rng, 3.0);
  const Tensor k = kv.wide.slice(1, 3, nkv * hd), v = kv.wide.slice(1, 3 + nkv * hd, nkv * hd);
  // Above e4m3's 448 after the scale: must saturate.
  if (cache == DType::F8E4M3) set(k, {0, 0}, 1000.0 * k_scale);
  Tensor kc = random_tensor({nb, bs, nkv, hd}, cache, rng),
         vc = random_tensor({nb, bs, nkv, hd}, cache, rng);
  const Tensor kc0 = clone(kc), vc0 = clone(vc);
  std::vector<int32_t> cells(static_cast<size_t>(nb * bs));
  std::iota(cells.begin(), cells.end(), 0);
  std::shuffle(cells.begin(), cells.end(), rng);
  std::vector<int32_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    slots[t] = (t % 3 == 2) ? -1 : cells[t];  // every third token is padding
  slots[0] = cells[0];
  ops::KvCacheWriteArgs a;
  a.k = k;
  a.v = v;
  a.k_cache = kc;
  a.v_cache = vc;
  a.slot_mapping = i32_tensor(slots);
  a.k_scale = k_scale;
  a.v_scale = v_scale;
  OpContext ctx;
  ops::run(ctx, a);

  std::vector<int64_t> writer(static_cast<size_t>(nb * bs), -1);
  for (int64_t t = 0; t < T; ++t)
    if (slots[t] >= 0) writer[static_cast<size_t>(slots[t])] = t;
  Comparison cmp;
  for (int64_t cell = 0; cell < nb * bs; ++cell)
    for (int64_t g = 0; g < nkv; ++g)
      for (int64_t d = 0; d < hd; ++d) {
        const int64_t blk = cell / bs, off = cell % bs, t = writer[static_cast<size_t>(cell)];
        for (int which = 0; which < 2; ++which) {
          const Tensor& cache_t = which ? vc : kc;
          const double got = get(cache_t, {blk, off, g, d});
          if (t < 0) {  // not written: unchanged bits
            cmp.check(got, get(which ? vc0 : kc0, {blk, off, g, d}), 0.0,
                      fmt::format("untouched cell {}", cell));
            continue;
          }
          double want = get(which ? v : k, {t, g * hd + d});
          // e4m3 stores v / scale (scales are ignored for other cache dtypes).
          if (cache == DType::F8E4M3)
            want = std::clamp(want / (which ? v_scale : k_scale), -448.0, 448.0);
          // One rounding into the cache dtype (none when it equals the activation dtype); e4m3
          // subnormals (below 2^-6) are 2^-9 apart: at most 2^-10 absolute there.
          const double sub = cache == DType::F8E4M3 ? std::ldexp(1.0, -10) : 0.0;
          cmp.check(got, want, cache == act ? 0.0 : unit_roundoff(cache) * std::fabs(want) + sub,
                    fmt::format("cell {} token {} g {} d {}", cell, t, g, d));
        }
      }
  EXPECT_EQ(cmp.compared, 2 * nb * bs * nkv * hd);
  EXPECT_EQ(cmp.failed, 0);
  if (cache == DType::F8E4M3) {
    EXPECT_EQ(get(kc, {cells[0] / bs, cells[0] % bs, 0, 0}), 448.0);
  }
}

// An e4m3 cache with scales reads as f32(code) * scale: attention over it must give the same bits
// as attention over an f32 cache holding those products (which the float64 test above covers).
TEST(HostAttention, Fp8CacheReadsCodesTimesScales) {
  const AttnCase c{4, 2, 8, 4, 24, DType::BF16, {{1, 1}, {5, 5}, {3, 11}, {1, 9}}, 0.35f};
  std::mt19937_64 rng(340);
  const AttnSetup s = make_setup(c, true, rng, 1340);
  const float k_scale = 0.37f, v_scale = 2.5f;
  AttnSetup f8 = s, deq = s;
  f8.k_cache = Tensor::empty(s.k_cache.shape(), DType::F8E4M3);
  f8.v_cache = Tensor::empty(s.v_cache.shape(), DType::F8E4M3);
  deq.k_cache = Tensor::empty(s.k_cache.shape(), DType::F32);
  deq.v_cache = Tensor::empty(s.v_cache.shape(), DType::F32);
  int64_t cells = 0;
  for (int64_t i = 0; i < s.k_cache.numel(); ++i) {  // contiguous caches: flat offsets
    const size_t at = static_cast<size_t>(i);
    for (int which = 0; which < 2; ++which) {
      const float sc = which ? v_scale : k_scale;
      const double v = load_as_f64(which ? s.v_cache.raw() : s.k_cache.raw(), s.k_cache.dtype(), at);
      Tensor& code = which ? f8.v_cache : f8.k_cache;
      // Poisoned (unused) cells become 0: the e4m3 cache holds no NaN.
      store_from_f32(code.raw(), DType::F8E4M3, at, std::isfinite(v) ? static_cast<float>(v / sc) : 0.f);
      store_from_f32((which ? deq.v_cache : deq.k_cache).raw(), DType::F32, at,
                     static_cast<float>(load_as_f64(code.raw(), DType::F8E4M3, at)) * sc);
    }
    ++cells;
  }
  EXPECT_EQ(cells, s.k_cache.numel());
  const int64_t T = s.cu.back();
  Tensor q = random_tensor({T, c.n_heads * c.hd}, c.act, rng);
  auto run = [&](const AttnSetup& st, float ks, float vs) {
    ops::AttentionArgs a;
    a.q = q;
    a.k_cache = st.k_cache;
    a.v_cache = st.v_cache;
    a.block_tables = st.block_tables;
    a.cu_seqlens_q = i32_tensor(st.cu);
    std::vector<int32_t> ctx;
    for (const auto& sq : c.seqs)
      ctx.push_back(sq.ctx);
    a.context_lens = i32_tensor(ctx);
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv;
    a.head_dim = c.hd;
    a.max_q_len = 5;
    a.scale = c.scale;
    a.k_scale = ks;
    a.v_scale = vs;
    a.out = Tensor::empty({T, c.n_heads * c.hd}, c.act);
    poison(a.out);
    OpContext octx;
    ops::run(octx, a);
    return a.out;
  };
  const Tensor got = run(f8, k_scale, v_scale), want = run(deq, 1.f, 1.f);
  const Tensor unscaled = run(f8, 1.f, 1.f);
  Comparison same;
  int64_t differ = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t col = 0; col < c.n_heads * c.hd; ++col) {
      same.check(get(got, {t, col}), get(want, {t, col}), 0.0, fmt::format("t {} col {}", t, col));
      differ += get(unscaled, {t, col}) != get(want, {t, col});
    }
  EXPECT_EQ(same.compared, T * c.n_heads * c.hd);
  EXPECT_EQ(same.failed, 0);
  EXPECT_GT(differ, T * c.n_heads * c.hd / 2);  // the scales matter
}

TEST(HostKvCacheWrite, WritesSlotsSkipsPaddingLeavesTheRest) {
  run_kv_write_case(7, 2, 8, 4, 5, DType::BF16, DType::BF16, 320);
  run_kv_write_case(10, 1, 5, 3, 6, DType::F32, DType::F32, 321);
  run_kv_write_case(6, 2, 4, 2, 4, DType::BF16, DType::F8E4M3, 322);
  run_kv_write_case(9, 2, 8, 4, 5, DType::BF16, DType::F8E4M3, 323, 0.37f, 2.5f);
}

TEST(HostKvCacheWrite, BadSlotsFail) {
  std::mt19937_64 rng(330);
  ops::KvCacheWriteArgs a;
  a.k = random_tensor({2, 4}, DType::F32, rng);
  a.v = random_tensor({2, 4}, DType::F32, rng);
  a.k_cache = Tensor::zeros({2, 2, 1, 4}, DType::F32);
  a.v_cache = Tensor::zeros({2, 2, 1, 4}, DType::F32);
  OpContext ctx;
  a.slot_mapping = i32_tensor({0, 4});
  EXPECT_THROW(ops::run(ctx, a), Error);
  a.slot_mapping = i32_tensor({3, 3});
  EXPECT_THROW(ops::run(ctx, a), Error);
}

}  // namespace
}  // namespace strata::reftest
