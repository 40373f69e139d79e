// Cases: embedding, rms_norm, gated_rms_norm, relu2, add, cast, kv_cache_write. The norms include
// inputs of mean square ~eps (1e-5), where an epsilon off by 10x moves the output by ~40%.
#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

std::vector<OpCase> embedding_cases() {
  struct S {
    const char* name;
    int64_t V, H, T;
    bool strided_out;
  };
  const S shapes[] = {{"nano3", Nano3::vocab, Nano3::hidden, 3, false},
                      {"9b (V 32768)", 32768, Nano9B::hidden, 1, false},
                      {"odd", 1031, 131, 17, true}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      out.push_back({"embedding",
                     fmt::format("{} V={} H={} T={} {}{}", s.name, s.V, s.H, s.T, dt(act),
                                 s.strided_out ? " out-view" : ""),
                     true, [s, act](Rng& rng) {
                       EmbeddingArgs a;
                       a.table = normal_tensor(rng, Shape{s.V, s.H}, act, 1.f);
                       std::vector<int32_t> ids;
                       for (int64_t t = 0; t < s.T; ++t)
                         ids.push_back(rng.int_in(0, static_cast<int32_t>(s.V - 1)));
                       a.ids = i32_tensor(ids);
                       a.out = s.strided_out
                                   ? Tensor::empty(Shape{s.T, s.H + 5}, act).slice(1, 2, s.H)
                                   : Tensor::empty(Shape{s.T, s.H}, act);
                       return run_case(a, act, Tolerance{});  // a copy: exact
                     }});
  return out;
}

std::vector<OpCase> rms_norm_cases() {
  struct S {
    const char* name;
    int64_t T, H;
    bool residual, x_view;
    float x_std = 1.f;  // small: eps dominates the mean square, so a wrong eps shows
    bool x2 = false;    // a second addend of x (the MoE's add fused in)
  };
  const S shapes[] = {{"eps-dominated", 5, 257, true, false, 2e-3f},
                      {"nano3", 1, Nano3::hidden, true, false},
                      {"nano3", 17, Nano3::hidden, true, true},
                      {"nano3 first layer", 3, Nano3::hidden, false, false},
                      // Odd token counts and widths.
                      {"nano3", 2, Nano3::hidden, true, false},
                      {"nano3", 255, Nano3::hidden, true, false},
                      {"nano3", 4097, Nano3::hidden, true, false},
                      {"4 chunks per lane", 6, 1024, false, false},
                      {"8 chunks per lane", 9, 2048, true, false},
                      {"12 chunks per lane", 4, 3072, true, false},
                      // x + x2 (the MoE block's routed + shared experts) in both forms:
                      // registers, strided (x view, odd).
                      {"nano3 +x2", 1, Nano3::hidden, true, false, 1.f, true},
                      {"nano3 +x2", 17, Nano3::hidden, true, false, 1.f, true},
                      {"nano3 +x2", 512, Nano3::hidden, true, false, 1.f, true},
                      {"nano3 +x2 x-view", 3, Nano3::hidden, true, true, 1.f, true},
                      {"odd +x2", 130, 131, true, true, 1.f, true},
                      {"odd +x2 no residual", 5, 257, false, false, 1.f, true},
                      {"9b", 3, Nano9B::hidden, true, false},
                      {"odd", 130, 131, true, true},
                      {"odd", 300, 257, false, true}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      out.push_back({"rms_norm",
                     fmt::format("{} T={} H={} {}{}{}", s.name, s.T, s.H, dt(act),
                                 s.residual ? " +residual" : "", s.x_view ? " x-view" : ""),
                     true, [s, act](Rng& rng) {
                       RmsNormArgs a;
                       a.x = s.x_view ? wide_rows(rng, s.T, s.H, 7, 3, act, s.x_std)
                                      : normal_tensor(rng, Shape{s.T, s.H}, act, s.x_std);
                       if (s.residual)
                         a.residual = normal_tensor(rng, Shape{s.T, s.H}, act, s.x_std);
                       if (s.x2) a.x2 = normal_tensor(rng, Shape{s.T, s.H}, act, s.x_std);
                       a.weight = uniform_tensor(rng, Shape{s.H}, act, 0.5f, 1.5f);
                       a.eps = 1e-5f;
                       a.out = Tensor::empty(Shape{s.T, s.H}, act);
                       // Roundings: the x + x2 sum, the residual sum and the normalized value
                       // (then the output); the sum of squares reduces H terms; one sqrt.
                       Tolerance tol;
                       tol.reduction = s.H;
                       tol.roundings = (s.residual ? 2 : 1) + (s.x2 ? 1 : 0);
                       tol.math = 1;
                       return run_case(a, act, tol);
                     }});
  return out;
}

std::vector<OpCase> gated_norm_cases() {
  struct S {
    const char* name;
    int64_t T, D, G;
    float y_std = 1.f;  // small: eps dominates the mean square, so a wrong eps shows
  };
  const S shapes[] = {{"eps-dominated", 3, 384, 2, 2e-3f},
                      {"nano3", 1, Nano3::d_inner, Nano3::groups},
                      {"nano3", 17, Nano3::d_inner, Nano3::groups},
                      // The warp form (cuda.warp, from 64 rows): odd token counts, 2 / 4 / 8
                      // chunks per lane (at 4097 rows; the smaller cases take the block form).
                      {"nano3", 2, Nano3::d_inner, Nano3::groups},
                      {"nano3", 255, Nano3::d_inner, Nano3::groups},
                      {"nano3", 4097, Nano3::d_inner, Nano3::groups},
                      {"groups of 1024", 65, 4096, 4},
                      {"groups of 2048", 67, 4096, 2},
                      {"nano3", 64, Nano3::d_inner, Nano3::groups},
                      {"9b", 3, Nano9B::d_inner, Nano9B::groups},
                      {"odd", 130, 381, 3},
                      {"odd one group", 5, 131, 1}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      out.push_back(
          {"gated_rms_norm",
           fmt::format("{} T={} D={} groups={} {}", s.name, s.T, s.D, s.G, dt(act)), true,
           [s, act](Rng& rng) {
             GatedRmsNormArgs a;
             a.y = normal_tensor(rng, Shape{s.T, s.D}, act, s.y_std);
             a.z =
                 wide_rows(rng, s.T, s.D, 64, 0, act, 1.5f);  // z: first columns of in_proj's rows
             a.weight = uniform_tensor(rng, Shape{s.D}, act, 0.5f, 1.5f);
             a.groups = s.G;
             a.eps = 1e-5f;
             a.out = Tensor::empty(Shape{s.T, s.D}, act);
             Tolerance tol;  // one act rounding before the weight; group-size sum; exp + sqrt
             tol.reduction = s.D / s.G;
             tol.roundings = 1;
             tol.math = 2;
             return run_case(a, act, tol);
           }});
  return out;
}

std::vector<OpCase> elementwise_cases() {
  struct S {
    int64_t T, N;
  };
  const S shapes[] = {
      {1, Nano9B::mlp}, {17, Nano3::shared_width}, {130, 131}, {300, Nano3::expert_width}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts()) {
      out.push_back(
          {"relu2", fmt::format("T={} N={} {}", s.T, s.N, dt(act)), true, [s, act](Rng& rng) {
             Relu2Args a;
             a.x = wide_rows(rng, s.T, s.N, 9, 4, act, 2.f);
             a.out = Tensor::empty(Shape{s.T, s.N}, act);
             return run_case(a, act, Tolerance{});
           }});
      out.push_back(
          {"add", fmt::format("T={} N={} {}", s.T, s.N, dt(act)), true, [s, act](Rng& rng) {
             AddArgs a;
             a.a = normal_tensor(rng, Shape{s.T, s.N}, act, 1.f);
             a.b = wide_rows(rng, s.T, s.N, 3, 1, act, 1.f);
             a.out = Tensor::empty(Shape{s.T, s.N}, act);
             return run_case(a, act, Tolerance{});
           }});
    }
  // 16-byte aligned bf16 rows (the vectorized kernels): row views of wider rows.
  out.push_back({"relu2", "aligned rows T=257 N=15680 bf16", true, [](Rng& rng) {
                   Relu2Args a;
                   a.x = wide_rows(rng, 257, 15680, 8, 8, DType::BF16, 2.f);
                   a.out = Tensor::empty(Shape{257, 15680}, DType::BF16);
                   return run_case(a, DType::BF16, Tolerance{});
                 }});
  out.push_back({"add", "aligned rows T=257 N=2688 bf16", true, [](Rng& rng) {
                   AddArgs a;
                   a.a = normal_tensor(rng, Shape{257, 2688}, DType::BF16, 1.f);
                   a.b = wide_rows(rng, 257, 2688, 16, 8, DType::BF16, 1.f);
                   a.out = Tensor::empty(Shape{257, 2688}, DType::BF16);
                   return run_case(a, DType::BF16, Tolerance{});
                 }});
  out.push_back({"relu2", "in place T=17 N=1856 bf16", true, [](Rng& rng) {
                   Relu2Args a;
                   a.x = normal_tensor(rng, Shape{17, 1856}, DType::BF16, 2.f);
                   a.out = a.x;
                   return run_case(a, DType::BF16, Tolerance{});
                 }});
  const std::pair<DType, DType> casts[] = {{DType::BF16, DType::F32},
                                           {DType::F32, DType::BF16},
                                           {DType::F32, DType::F16},
                                           {DType::F16, DType::F32}};
  for (auto [from, to] : casts)
    for (int64_t n : {int64_t{1}, int64_t{131}, Nano3::vocab * 2})
      out.push_back({"cast", fmt::format("[{}] {} -> {}", n, dt(from), dt(to)), true,
                     [n, from, to](Rng& rng) {
                       CastArgs a;
                       a.x = normal_tensor(rng, Shape{n}, from, 10.f);
                       a.out = Tensor::empty(Shape{n}, to);
                       return run_case(a, to, Tolerance{});
                     }});
  return out;
}

std::vector<OpCase> kv_write_cases() {
  struct S {
    const char* name;
    int64_t T, nkv, hd, blocks, bs;
  };
  const S shapes[] = {{"nano3", 1, Nano3::kv_heads, Nano3::attn_dim, 64, 16},
                      {"nano3", 130, Nano3::kv_heads, Nano3::attn_dim, 64, 16},
                      {"9b", 17, Nano9B::kv_heads, Nano9B::attn_dim, 32, 16},
                      {"odd", 17, 3, 5, 9, 7}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      for (bool fp8 : {false, true})
        out.push_back(
            {"kv_cache_write",
             fmt::format("{} T={} n_kv={} hd={} blocks={}x{} {}{}", s.name, s.T, s.nkv, s.hd,
                         s.blocks, s.bs, dt(act), fp8 ? " e4m3 cache, scales 0.37/2.5" : ""),
             true, [s, act, fp8](Rng& rng) {
               KvCacheWriteArgs a;
               const int64_t W = s.nkv * s.hd;
               // k and v: column ranges of one fused qkv projection row.
               Tensor qkv = normal_tensor(rng, Shape{s.T, 3 * W}, act, 1.f);
               a.k = qkv.slice(1, W, W);
               a.v = qkv.slice(1, 2 * W, W);
               const Shape cache{s.blocks, s.bs, s.nkv, s.hd};
               if (fp8) {  // e4m3(k / k_scale): host and device divide and round alike
                 float unused = 0.f;
                 a.k_cache = fp8_weight(rng, cache, 1.f, &unused);
                 a.v_cache = fp8_weight(rng, cache, 1.f, &unused);
                 a.k_scale = 0.37f;
                 a.v_scale = 2.5f;
               } else {
                 a.k_cache = normal_tensor(rng, cache, act, 1.f);
                 a.v_cache = normal_tensor(rng, cache, act, 1.f);
               }
               std::vector<int32_t> slots = distinct(rng, s.T, s.blocks * s.bs);
               for (size_t i = 0; i < slots.size(); i += 5)
                 slots[i] = -1;  // padding tokens
               a.slot_mapping = i32_tensor(slots);
               return run_case(a, act, Tolerance{});
             }});
  return out;
}

std::vector<OpCase> all() {
  std::vector<OpCase> out;
  for (auto f :
       {embedding_cases, rms_norm_cases, gated_norm_cases, elementwise_cases, kv_write_cases})
    for (auto& c : f())
      out.push_back(std::move(c));
  return out;
}

}  // namespace

STRATA_OP_CASES(all);

}  // namespace strata::opstest
