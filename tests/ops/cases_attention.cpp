// Cases: attention over the paged cache, decode (one query per sequence, split-K over long
// contexts) and prefill (causal over the last q_len positions, chunked-prefill continuations),
// with scattered block tables.
#include <algorithm>
#include <cmath>

#include "cases_util.h"
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/attention.h"
#endif

namespace strata::opstest {
namespace {

using namespace strata::ops;

struct S {
  const char* name;
  int64_t nh, nkv, hd, bs;
  std::vector<int32_t> q_lens, ctx;
};

// The bound of P V with bf16 probabilities, per output element (bf16 activations): the model
// (transformers' eager attention) casts the softmax probabilities to the query dtype before
// P V, and the tensor-core kernels do the same (one bf16 P per mma). Rounding each p_j to bf16
// (round to nearest, 8 significant bits) moves it by at most 2^-8 p_j, so the output
// sum_j p_j v_j / sum_j p_j moves by at most 2^-8 sum_j p_j |v_j| / sum_j p_j: the same
// attention with |v| for v, which the host computes here. The f32 accumulation bound stays in
// the harness's tolerance. The host's bf16 rounding of the bound (2^-8 relative) is covered by
// the factor 1 + 2^-7.
Tensor bf16_p_bound(const AttentionArgs& a) {
  AttentionArgs b = a;
  // |v|: clear the sign bit of every element (the top bit of its little-endian bytes).
  b.v_cache = Tensor::empty(a.v_cache.shape(), a.v_cache.dtype());
  b.v_cache.copy_from(a.v_cache);
  const size_t es = dtype_size(a.v_cache.dtype());
  uint8_t* bytes = static_cast<uint8_t*>(b.v_cache.raw());
  for (size_t i = es - 1; i < b.v_cache.nbytes(); i += es)
    bytes[i] &= 0x7f;
  b.out = Tensor::empty(a.out.shape(), a.out.dtype());
  OpContext ctx;
  ctx.device = Device::Host;
  ops::run(ctx, b);
  Tensor bound = Tensor::empty(a.out.shape(), DType::F32);
  float* dst = bound.data<float>();
  const Tensor src = b.out.contiguous();
  for (int64_t i = 0; i < bound.numel(); ++i)
    dst[i] = static_cast<float>(std::ldexp(1.0, -8) * (1 + std::ldexp(1.0, -7)) *
                                load_as_f64(src.raw(), src.dtype(), static_cast<size_t>(i)));
  return bound;
}

// fp8: e4m3 caches with per-layer scales (FP8 KV), read as code * scale by both backends.
Outcome run_attention(const S& s, DType act, bool fp8, Rng& rng) {
  AttentionArgs a;
  const int64_t B = static_cast<int64_t>(s.q_lens.size());
  std::vector<int32_t> cu{0};
  int64_t max_blocks = 1, used = 0;
  for (int64_t b = 0; b < B; ++b) {
    cu.push_back(cu.back() + s.q_lens[static_cast<size_t>(b)]);
    const int64_t nb = (s.ctx[static_cast<size_t>(b)] + s.bs - 1) / s.bs;
    max_blocks = std::max(max_blocks, nb);
    used += nb;
  }
  const int64_t T = cu.back(), num_blocks = used + 3;
  // Physical blocks handed out in random order; unused table entries point at block 0.
  std::vector<int32_t> phys = distinct(rng, used, num_blocks);
  std::vector<int32_t> table(static_cast<size_t>(B * max_blocks), 0);
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nb = (s.ctx[static_cast<size_t>(b)] + s.bs - 1) / s.bs;
    for (int64_t i = 0; i < nb; ++i)
      table[static_cast<size_t>(b * max_blocks + i)] = phys[next++];
  }
  const int64_t qw = s.nh * s.hd;
  Tensor qkv = normal_tensor(rng, Shape{T, qw + 2 * s.nkv * s.hd}, act, 1.f);
  a.q = qkv.slice(1, 0, qw);
  const Shape cache{num_blocks, s.bs, s.nkv, s.hd};
  if (fp8) {
    a.k_cache = fp8_weight(rng, cache, 1.f, &a.k_scale);
    a.v_cache = fp8_weight(rng, cache, 1.f, &a.v_scale);
  } else {
    a.k_cache = normal_tensor(rng, cache, act, 1.f);
    a.v_cache = normal_tensor(rng, cache, act, 1.f);
  }
  a.block_tables = i32_tensor(table, Shape{B, max_blocks});
  a.cu_seqlens_q = i32_tensor(cu);
  a.context_lens = i32_tensor(s.ctx);
  a.n_heads = s.nh;
  a.n_kv_heads = s.nkv;
  a.head_dim = s.hd;
  a.max_q_len = *std::max_element(s.q_lens.begin(), s.q_lens.end());
  a.scale = 1.f / std::sqrt(static_cast<float>(s.hd));
  a.out = Tensor::empty(Shape{T, qw}, act);
  // Scores sum hd products; softmax and output sum over the context; exp per key.
  // Long contexts: the tensor-core kernels accumulate P.V with mma.sync, which aligns each
  // k16 step's products to the f32 accumulator and truncates (rounds toward zero) instead of
  // rounding, so every 16 keys the running output may lose up to ~1 ulp of itself and ~1 ulp
  // of the step's products, with a bias that random signs do not average away: up to ~2 ctx /
  // 16 ulps of the output's scale, where a rounded f32 sum errs by ~8 sqrt(ctx) (the bound
  // below). The two meet near 4K keys; at 16,400 keys the unsplit flash kernel measured 1,107
  // ulps of the output rms on one element (H200, 2026-12-02) against 8 sqrt = 1,028. The
  // reduction length is raised so that 8 sqrt(reduction) = ctx / 8.
  const int64_t ctx_max = *std::max_element(s.ctx.begin(), s.ctx.end());
  Tolerance tol;
  tol.reduction = std::max<int64_t>(s.hd + ctx_max, (ctx_max / 64) * (ctx_max / 64));
  tol.math = 2;
  if (act == DType::BF16) tol.extra_abs = bf16_p_bound(a);
  return run_case(a, act, tol);
}

// Forces every CUDA attention kernel's split-K choice for one case (0: the heuristics, 1: no
// split, n: n splits), restoring the previous setting after.
class SplitsOverride {
 public:
  explicit SplitsOverride(int64_t n) {
#ifdef STRATA_HAVE_CUDA
    prev_ = cuda::attention_splits_override();
    cuda::set_attention_splits_override(n);
#else
    (void)n;
#endif
  }
  ~SplitsOverride() {
#ifdef STRATA_HAVE_CUDA
    cuda::set_attention_splits_override(prev_);
#endif
  }
  SplitsOverride(const SplitsOverride&) = delete;
  SplitsOverride& operator=(const SplitsOverride&) = delete;

 private:
  int64_t prev_ = 0;
};

// Split-K over long contexts (flash-decoding): contexts 1, 17, 4097 and 16400 in one decode
// step, a mixed step with a chunk at a long context, and a short prefill chunk continuing a
// 16K context (short: the host reference's time); each with the split off (1), forced (5:
// splits past a short context have no keys) and the heuristics' choice (0), on bf16 and e4m3
// caches.
void add_split_cases(std::vector<OpCase>& out) {
  const S shapes[] = {
      {"split decode", Nano3::q_heads, Nano3::kv_heads, 128, 16, {1, 1, 1, 1},
       {1, 17, 4097, 16400}},
      {"split mixed", Nano9B::q_heads, Nano9B::kv_heads, 128, 16, {1, 17, 1}, {16385, 4097, 17}},
      {"split prefill at 16K", Nano3::q_heads, Nano3::kv_heads, 128, 16, {6}, {16400}},
  };
  for (const S& s : shapes)
    for (bool fp8 : {false, true})
      for (int64_t splits : {int64_t{1}, int64_t{5}, int64_t{0}})
        out.push_back(
            {"attention",
             fmt::format("{} heads {}/{}x{} block {} q_lens {} ctx {} bf16{} splits {}", s.name,
                         s.nh, s.nkv, s.hd, s.bs, fmt::join(s.q_lens, ","), fmt::join(s.ctx, ","),
                         fp8 ? " e4m3 cache" : "", splits == 0 ? std::string("auto")
                                                               : std::to_string(splits)),
             true, [s, fp8, splits](Rng& rng) {
               SplitsOverride force(splits);
               return run_attention(s, DType::BF16, fp8, rng);
             }});
}

std::vector<OpCase> attention_cases() {
  const int64_t n3q = Nano3::q_heads, n3kv = Nano3::kv_heads, n9q = Nano9B::q_heads,
                n9kv = Nano9B::kv_heads;
  // The real models (head_dim 128; bf16 decode runs on both "cuda.decode" and "cuda"), then
  // every head_dim family the general kernel handles (1 .. 256: lanes own 1, 2, 4 or 8 dims,
  // masked past head_dim, vector loads only when head_dim is a multiple of that), including the
  // golden fixtures' 8, 12, 16 and 24, at odd block sizes and contexts.
  const S shapes[] = {
      {"nano3 decode", n3q, n3kv, 128, 16, {1}, {1000}},
      {"nano3 decode long", n3q, n3kv, 128, 16, {1}, {4099}},
      {"nano3 decode batch", n3q, n3kv, 128, 16, {1, 1, 1}, {1, 37, 700}},
      {"nano3 decode short of the table", n3q, n3kv, 128, 16, {1, 1}, {300, 4000}},
      {"nano3 decode odd block", n3q, n3kv, 128, 7, {1}, {1001}},
      {"9b decode", n9q, n9kv, 128, 16, {1, 1}, {513, 64}},
      {"nano3 prefill", n3q, n3kv, 128, 16, {130}, {130}},
      {"nano3 chunked prefill", n3q, n3kv, 128, 16, {17, 5}, {17, 40}},
      {"9b prefill", n9q, n9kv, 128, 32, {300}, {300}},
      {"9b mixed", n9q, n9kv, 128, 16, {1, 17, 3}, {90, 17, 20}},
      {"odd hd 64", 6, 3, 64, 7, {1, 3, 17}, {5, 3, 50}},
      {"odd mha", 4, 4, 64, 5, {13}, {29}},
      {"hd 64 decode", 8, 1, 64, 5, {1, 1}, {300, 3999}},
      {"hd 8", 8, 2, 8, 16, {1, 9}, {65, 9}},
      {"hd 12", 4, 2, 12, 16, {11}, {11}},
      {"hd 16 prefill", 4, 2, 16, 16, {23}, {23}},
      {"hd 16 decode", 4, 2, 16, 3, {1, 1}, {9, 333}},
      {"hd 24", 4, 1, 24, 16, {1, 6}, {50, 6}},
      {"hd 32", 8, 2, 32, 3, {1, 9}, {40, 9}},
      {"hd 80 decode", 10, 2, 80, 16, {1}, {777}},
      {"hd 80 prefill", 10, 5, 80, 11, {29}, {61}},
      {"hd 96", 12, 4, 96, 9, {31, 1}, {45, 100}},
      {"hd 256 mixed", 8, 2, 256, 16, {1, 20}, {300, 20}},
      {"hd 256 decode long", 16, 1, 256, 13, {1}, {2500}},
      // Mixed steps as the engine packs them (decode rows first, then prefill chunks) and a
      // longer prompt: the flash kernel's key tiles, causal masks and row packing.
      {"nano3 mixed", n3q, n3kv, 128, 16, {1, 1, 1, 40, 17}, {300, 17, 999, 40, 60}},
      {"9b mixed decode first", n9q, n9kv, 128, 16, {1, 1, 33, 2}, {64, 129, 100, 2}},
      {"nano3 prefill 600", n3q, n3kv, 128, 16, {600}, {600}},
      {"hd 64 group 64", 64, 1, 64, 16, {3, 70}, {3, 70}},
  };
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      out.push_back(
          {"attention",
           fmt::format("{} heads {}/{}x{} block {} q_lens {} ctx {} {}", s.name, s.nh, s.nkv, s.hd,
                       s.bs, fmt::join(s.q_lens, ","), fmt::join(s.ctx, ","), dt(act)),
           true, [s, act](Rng& rng) { return run_attention(s, act, false, rng); }});
  // FP8 KV (e4m3 caches, k_scale / v_scale): decode, prefill, mixed, odd head_dims.
  for (size_t i : {size_t{0}, size_t{2}, size_t{6}, size_t{9}, size_t{10}, size_t{13}, size_t{20},
                   size_t{24}, size_t{25}, size_t{27}})
    for (DType act : acts()) {
      const S& s = shapes[i];
      out.push_back(
          {"attention",
           fmt::format("{} heads {}/{}x{} block {} q_lens {} ctx {} {} e4m3 cache", s.name, s.nh,
                       s.nkv, s.hd, s.bs, fmt::join(s.q_lens, ","), fmt::join(s.ctx, ","),
                       dt(act)),
           true, [s, act](Rng& rng) { return run_attention(s, act, true, rng); }});
    }
  add_split_cases(out);
  return out;
}

}  // namespace

STRATA_OP_CASES(attention_cases);

}  // namespace strata::opstest
