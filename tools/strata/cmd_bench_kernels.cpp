// `strata bench-kernels`: times the decode-critical CUDA kernels on the Nano-3 and Nano-9B-v2
// shapes (batch 1) and reports achieved bandwidth against the H200's measured read ceiling
// (4.57 TB/s, spec/performance.md section 9). Each row: bytes the kernel must move at least
// (weights/state read once, state written once), the median time of one launch, GB/s, and the
// fraction of the ceiling. Launches are captured in a CUDA graph and replayed (no launch gaps);
// inputs rotate over enough copies that the working set exceeds the L2 cache.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bench_kernels_gemm.h"
#include "bench_kernels_scan.h"
#include "bench_kernels_small.h"
#include "bench_kernels_util.h"
#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/linear.h"
#include "ops/cuda/ssm.h"
#include "ops/ops.h"

namespace strata::cli {
namespace {

using namespace strata::ops;

using namespace strata::cli::bench_kernels;

using Row = BandwidthRow;

// Weight sets of one shape made on first use and shared by the rows that time it (the M sweep:
// making the weights on the host takes longer than timing a kernel).
struct SharedWeights {
  int64_t N = 0, K = 0;
  DType dt = DType::BF16;
  std::vector<Tensor> sets;
  const Tensor& get(int i) {
    if (sets.empty()) {
      const int n = sets_for(static_cast<double>(N * K) * static_cast<double>(dtype_size(dt)));
      for (int j = 0; j < n; ++j)
        sets.push_back(random_device(Shape{N, K}, dt, 1.f / std::sqrt(static_cast<float>(K))));
    }
    return sets[static_cast<size_t>(i)];
  }
};

// x_e4m3: W8A8 with x already quantized by its producer (ops.h QuantizedOut).
Row bench_linear(const char* kernel, const char* what, int64_t N, int64_t K, DType wt, bool w8a8,
                 DType out_dt, int64_t M = 1, SharedWeights* shared = nullptr,
                 bool x_e4m3 = false) {
  const double wbytes = static_cast<double>(N * K) * static_cast<double>(dtype_size(wt));
  const int sets = sets_for(wbytes);
  std::vector<LinearArgs> args(static_cast<size_t>(sets));
  for (size_t i = 0; i < args.size(); ++i) {
    LinearArgs& a = args[i];
    a.x = x_e4m3 ? random_device(Shape{M, K}, DType::F8E4M3, 64.f)
                 : random_device(Shape{M, K}, DType::BF16, 1.f);
    a.w.weight = shared ? shared->get(static_cast<int>(i))
                        : random_device(Shape{N, K}, wt, 1.f / std::sqrt(static_cast<float>(K)));
    if (wt == DType::F8E4M3) {
      a.w.weight_scale = 0.01f;
      a.w.input_scale = w8a8 ? 1.f / 64.f : 0.f;
    }
    a.out = Tensor::empty(Shape{M, N}, out_dt, Device::Cuda);
  }
  const auto& k = kernel_named<LinearArgs>(kernel);
  OpContext ctx;
  cuda::bind(ctx);
  std::string why;
  if (!k.supports(args[0], &why)) fail("bench linear {}: {}", kernel, why);
  Row r;
  r.kernel = fmt::format("linear {} {}", kernel,
                         wt == DType::F8E4M3 ? (x_e4m3 ? "fp8 W8A8 e4m3 x"
                                                : w8a8 ? "fp8 W8A8"
                                                       : "fp8 W8A16")
                                             : dtype_name(wt));
  r.shape = fmt::format("{} M={} N={} K={}", what, M, N, K);
  r.bytes = wbytes + static_cast<double>(
                         M * (K * (x_e4m3 ? 1 : 2) + N * static_cast<int64_t>(dtype_size(out_dt))));
  r.us = time_launches(sets, [&](int i) { k.run(args[static_cast<size_t>(i)], ctx); });
  return r;
}

Row bench_ssm_update(const char* what, int64_t Hm, int64_t P, int64_t G, int64_t N) {
  const double state_bytes = static_cast<double>(Hm * P * N) * 4.0;
  const int sets = sets_for(2 * state_bytes);
  SsmUpdateArgs a;
  const int64_t width = Hm * P + 2 * G * N + Hm;
  Tensor row = random_device(Shape{1, width}, DType::BF16, 1.f);
  a.x = row.slice(1, 0, Hm * P);
  a.B = row.slice(1, Hm * P, G * N);
  a.C = row.slice(1, Hm * P + G * N, G * N);
  a.dt_raw = row.slice(1, Hm * P + 2 * G * N, Hm);
  a.A = random_device(Shape{Hm}, DType::F32, 1.f);
  a.D = random_device(Shape{Hm}, DType::F32, 1.f);
  a.dt_bias = random_device(Shape{Hm}, DType::F32, 1.f);
  a.ssm_states = random_device(Shape{sets, Hm, P, N}, DType::F32, 0.5f);
  a.heads = Hm;
  a.head_dim = P;
  a.groups = G;
  a.state_size = N;
  a.out = Tensor::empty(Shape{1, Hm * P}, DType::BF16, Device::Cuda);
  std::vector<Tensor> slots;
  for (int i = 0; i < sets; ++i)
    slots.push_back(device_i32({i}));
  OpContext ctx;
  cuda::bind(ctx);
  Row r;
  r.kernel = "ssm_update (f32 state)";
  r.shape = fmt::format("{} B=1 heads {}x{} N={}", what, Hm, P, N);
  r.bytes = 2 * state_bytes + static_cast<double>(width * 2 + Hm * P * 2);
  r.us = time_launches(sets, [&](int i) {
    a.slots = slots[static_cast<size_t>(i)];
    ops::run(ctx, a);
  });
  return r;
}

Row bench_conv_update(const char* what, int64_t C) {
  const int64_t K = 4;
  const double state_bytes = static_cast<double>((K - 1) * C) * 2.0;
  const int sets = 64;  // a small state: rotate over many slots
  Conv1dUpdateArgs a;
  a.x = random_device(Shape{1, C}, DType::BF16, 1.f);
  a.weight = random_device(Shape{C, K}, DType::BF16, 0.5f);
  a.bias = random_device(Shape{C}, DType::BF16, 0.5f);
  a.conv_states = random_device(Shape{sets, K - 1, C}, DType::BF16, 1.f);
  a.out = Tensor::empty(Shape{1, C}, DType::BF16, Device::Cuda);
  std::vector<Tensor> slots;
  for (int i = 0; i < sets; ++i)
    slots.push_back(device_i32({i}));
  OpContext ctx;
  cuda::bind(ctx);
  Row r;
  r.kernel = "conv1d_update (bf16)";
  r.shape = fmt::format("{} B=1 C={} K={}", what, C, K);
  r.bytes = 2 * state_bytes + static_cast<double>(C * K * 2 + C * 2 + 2 * C * 2);
  r.us = time_launches(sets, [&](int i) {
    a.slots = slots[static_cast<size_t>(i)];
    ops::run(ctx, a);
  });
  return r;
}

// Decode attention through the named kernel ("cuda.decode": the one ops::run picks for bf16
// decode; "cuda": the general family, for comparison).
// One decode row over a context of ctx_len keys; fp8: e4m3 caches (FP8 KV) with scales.
Row bench_attention(const char* kernel, const char* what, int64_t nh, int64_t nkv, int64_t ctx_len,
                    bool fp8 = false) {
  const int64_t hd = 128, bs = 16, nb = (ctx_len + bs - 1) / bs;
  const DType kv_dt = fp8 ? DType::F8E4M3 : DType::BF16;
  const double kv_bytes =
      static_cast<double>(2 * ctx_len * nkv * hd * static_cast<int64_t>(dtype_size(kv_dt)));
  const int sets = sets_for(kv_bytes);
  AttentionArgs a;
  a.q = random_device(Shape{1, nh * hd}, DType::BF16, 1.f);
  a.k_cache = random_device(Shape{sets * nb, bs, nkv, hd}, kv_dt, 1.f);
  a.v_cache = random_device(Shape{sets * nb, bs, nkv, hd}, kv_dt, 1.f);
  if (fp8) {
    a.k_scale = 0.01f;
    a.v_scale = 0.01f;
  }
  a.cu_seqlens_q = device_i32({0, 1});
  a.context_lens = device_i32({static_cast<int32_t>(ctx_len)});
  a.n_heads = nh;
  a.n_kv_heads = nkv;
  a.head_dim = hd;
  a.max_q_len = 1;
  a.scale = 1.f / std::sqrt(static_cast<float>(hd));
  a.out = Tensor::empty(Shape{1, nh * hd}, DType::BF16, Device::Cuda);
  std::vector<Tensor> tables;
  for (int i = 0; i < sets; ++i) {
    std::vector<int32_t> t(static_cast<size_t>(nb));
    for (int64_t j = 0; j < nb; ++j)
      t[static_cast<size_t>(j)] = static_cast<int32_t>(i * nb + j);
    tables.push_back(device_i32(t).reshape(Shape{1, nb}));
  }
  const auto& k = kernel_named<AttentionArgs>(kernel);
  OpContext ctx;
  cuda::bind(ctx);
  a.block_tables = tables[0];
  std::string why;
  if (!k.supports(a, &why)) fail("bench attention {}: {}", kernel, why);
  Row r;
  r.kernel = fmt::format("attention {} decode ({} KV)", kernel, fp8 ? "e4m3" : "bf16");
  r.shape = fmt::format("{} heads {}/{}x{} ctx {}", what, nh, nkv, hd, ctx_len);
  r.bytes = kv_bytes + static_cast<double>(2 * nh * hd * 2);
  r.us = time_launches(sets, [&](int i) {
    a.block_tables = tables[static_cast<size_t>(i)];
    k.run(a, ctx);
  });
  return r;
}

// Prefill attention through the named kernel ("cuda.flash": the one ops::run picks for bf16
// prefill; "cuda": the general family): `seqs` prompts of `len` tokens each, causal over the
// prompt, bf16 KV. Bytes are q, k, v and out once; the shape label gives the causal GFLOP
// (4 n_heads hd sum over prompts of len (len + 1) / 2) for TFLOP/s.
Row bench_attention_prefill(const char* kernel, const char* what, int64_t nh, int64_t nkv,
                            int64_t seqs, int64_t len) {
  const int64_t hd = 128, bs = 16, nb = (len + bs - 1) / bs, T = seqs * len;
  AttentionArgs a;
  a.q = random_device(Shape{T, nh * hd}, DType::BF16, 1.f);
  a.k_cache = random_device(Shape{seqs * nb, bs, nkv, hd}, DType::BF16, 1.f);
  a.v_cache = random_device(Shape{seqs * nb, bs, nkv, hd}, DType::BF16, 1.f);
  std::vector<int32_t> cu{0}, ctx_lens, table;
  for (int64_t s = 0; s < seqs; ++s) {
    cu.push_back(static_cast<int32_t>((s + 1) * len));
    ctx_lens.push_back(static_cast<int32_t>(len));
    for (int64_t j = 0; j < nb; ++j)
      table.push_back(static_cast<int32_t>(s * nb + j));
  }
  a.cu_seqlens_q = device_i32(cu);
  a.context_lens = device_i32(ctx_lens);
  a.block_tables = device_i32(table).reshape(Shape{seqs, nb});
  a.n_heads = nh;
  a.n_kv_heads = nkv;
  a.head_dim = hd;
  a.max_q_len = len;
  a.scale = 1.f / std::sqrt(static_cast<float>(hd));
  a.out = Tensor::empty(Shape{T, nh * hd}, DType::BF16, Device::Cuda);
  const auto& k = kernel_named<AttentionArgs>(kernel);
  OpContext ctx;
  cuda::bind(ctx);
  std::string why;
  if (!k.supports(a, &why)) fail("bench attention prefill {}: {}", kernel, why);
  const double gflop = 4.0 * static_cast<double>(nh * hd * seqs * len * (len + 1) / 2) / 1e9;
  Row r;
  r.kernel = fmt::format("attention {} prefill (bf16 KV)", kernel);
  r.shape =
      fmt::format("{} heads {}/{}x{} {}x{} ({:.2f} GFLOP)", what, nh, nkv, hd, seqs, len, gflop);
  r.bytes = static_cast<double>(2 * T * (2 * nh + 2 * nkv) * hd);
  r.us = time_launches(4, [&](int) { k.run(a, ctx); });
  return r;
}

Row bench_moe(const char* kernel, const char* what, DType wt, bool w8a8) {
  const int64_t E = 128, k = 6, H = 2688, I = 1856;
  auto up = std::make_shared<std::vector<LinearWeight>>(static_cast<size_t>(E));
  auto down = std::make_shared<std::vector<LinearWeight>>(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    auto& u = (*up)[static_cast<size_t>(e)];
    auto& d = (*down)[static_cast<size_t>(e)];
    u.weight = random_device(Shape{I, H}, wt, 1.f / std::sqrt(static_cast<float>(H)));
    d.weight = random_device(Shape{H, I}, wt, 1.f / std::sqrt(static_cast<float>(I)));
    if (wt == DType::F8E4M3) {
      u.weight_scale = d.weight_scale = 0.01f;
      u.input_scale = w8a8 ? 4.f / 448.f : 0.f;
      d.input_scale = w8a8 ? 2.f / 448.f : 0.f;
    }
  }
  const int sets = static_cast<int>(E / k);  // every set routes to 6 experts no other set uses
  MoeExpertsArgs a;
  a.x = random_device(Shape{1, H}, DType::BF16, 1.f);
  a.up = up.get();
  a.down = down.get();
  a.weights = random_device(Shape{1, k}, DType::F32, 1.f);
  a.out = Tensor::empty(Shape{1, H}, DType::BF16, Device::Cuda);
  std::vector<Tensor> ids;
  for (int i = 0; i < sets; ++i) {
    std::vector<int32_t> v;
    for (int64_t j = 0; j < k; ++j)
      v.push_back(static_cast<int32_t>(i * k + j));
    ids.push_back(device_i32(v).reshape(Shape{1, k}));
  }
  a.ids = ids[0];
  const auto& kern = kernel_named<MoeExpertsArgs>(kernel);
  std::string why;
  if (!kern.supports(a, &why)) fail("bench moe_experts {}: {}", kernel, why);
  OpContext ctx;
  cuda::bind(ctx);
  Row r;
  r.kernel = fmt::format("moe_experts {} {}", kernel,
                         wt == DType::F8E4M3 ? (w8a8 ? "fp8 W8A8" : "fp8 W8A16") : "bf16");
  r.shape = fmt::format("{} T=1 top{} of {} H={} I={}", what, k, E, H, I);
  r.bytes = static_cast<double>(k * 2 * H * I) * static_cast<double>(dtype_size(wt));
  r.us = time_launches(sets, [&](int i) {
    a.ids = ids[static_cast<size_t>(i)];
    kern.run(a, ctx);
  });
  return r;
}

// The routed experts for T tokens (batched decode and prefill; Nano-3 W8A8 shapes): every token
// routes to 6 distinct experts of 128 drawn uniformly, as issue 10's batch roofline assumes. The
// experts (1.3 GB of e4m3, far above the L2) are built once and shared by every row. Bytes: the
// distinct experts' weights once.
struct MoeExpertSet {
  std::vector<LinearWeight> up, down;
};
const MoeExpertSet& nano3_w8a8_experts() {
  static const MoeExpertSet set = [] {
    const int64_t E = 128, H = 2688, I = 1856;
    MoeExpertSet s;
    s.up.resize(static_cast<size_t>(E));
    s.down.resize(static_cast<size_t>(E));
    for (size_t e = 0; e < static_cast<size_t>(E); ++e) {
      s.up[e].weight = random_device(Shape{I, H}, DType::F8E4M3, 1.f);
      s.down[e].weight = random_device(Shape{H, I}, DType::F8E4M3, 1.f);
      s.up[e].weight_scale = s.down[e].weight_scale = 0.01f;
      s.up[e].input_scale = 4.f / 448.f;
      s.down[e].input_scale = 2.f / 448.f;
    }
    return s;
  }();
  return set;
}

Row bench_moe_tokens(const char* kernel, int64_t T) {
  const int64_t E = 128, k = 6, H = 2688, I = 1856;
  const MoeExpertSet& set = nano3_w8a8_experts();
  std::vector<int32_t> ids;
  std::vector<bool> used(static_cast<size_t>(E), false);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> pool(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e)
      pool[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    for (int64_t j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct experts
      const auto r = static_cast<int64_t>(next_bits() % static_cast<uint64_t>(E - j));
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(j + r)]);
      ids.push_back(pool[static_cast<size_t>(j)]);
      used[static_cast<size_t>(pool[static_cast<size_t>(j)])] = true;
    }
  }
  const auto distinct = std::count(used.begin(), used.end(), true);
  MoeExpertsArgs a;
  a.x = random_device(Shape{T, H}, DType::BF16, 1.f);
  a.up = &set.up;
  a.down = &set.down;
  a.ids = device_i32(ids).reshape(Shape{T, k});
  a.weights = random_device(Shape{T, k}, DType::F32, 1.f);
  a.out = Tensor::empty(Shape{T, H}, DType::BF16, Device::Cuda);
  const auto& kern = kernel_named<MoeExpertsArgs>(kernel);
  std::string why;
  Row r;
  r.kernel = fmt::format("moe_experts {} fp8 W8A8", kernel);
  // A kernel outside its dispatch limit (e.g. cuda.fp8_decode above STRATA_MOE_DECODE_MAX_TOKENS)
  // is reported as skipped, with its reason (us = 0).
  if (!kern.supports(a, &why)) {
    r.shape = fmt::format("nano3 T={}: skipped ({})", T, why);
    return r;
  }
  OpContext ctx;
  cuda::bind(ctx);
  r.shape = fmt::format("nano3 T={} ({} experts)", T, distinct);
  r.bytes = static_cast<double>(distinct * 2 * H * I) + static_cast<double>(T * H * 2 * 2);
  r.us = time_launches(1, [&](int) { kern.run(a, ctx); });
  return r;
}

void run_bench(const std::string& out_path, const std::string& only) {
  cuda::init_backend(0);
  // (label for --only, the measurement). Linear labels: kernel, shape, N, K, weight dtype,
  // W8A8, out dtype[, M=tokens].
  std::vector<std::pair<std::string, std::function<Row()>>> items;
  const auto linear = [&](const char* kernel, const char* what, int64_t N, int64_t K, DType wt,
                          bool w8a8, DType out, int64_t M = 1) {
    items.emplace_back(
        fmt::format("linear {}, {}, {}, {}, {}, {}, {}{}", kernel, what, N, K, dtype_name(wt), w8a8,
                    dtype_name(out), M > 1 ? fmt::format(", M={}", M) : ""),
        [=] { return bench_linear(kernel, what, N, K, wt, w8a8, out, M); });
  };
  const auto moe = [&](const char* kernel, DType wt, bool w8a8) {
    items.emplace_back(fmt::format("moe {}, nano3, {}, {}", kernel, dtype_name(wt), w8a8),
                       [=] { return bench_moe(kernel, "nano3", wt, w8a8); });
  };
  const DType bf = DType::BF16, e4 = DType::F8E4M3, f32 = DType::F32;
  linear("cuda.small_m", "nano3 in_proj", 10304, 2688, bf, false, bf);
  linear("cuda.cublaslt", "nano3 in_proj", 10304, 2688, bf, false, bf);
  linear("cuda.small_m", "nano3 out_proj", 2688, 4096, bf, false, bf);
  linear("cuda.small_m", "nano3 lm_head", 131072, 2688, bf, false, f32);
  linear("cuda.small_m", "nano3 in_proj", 10304, 2688, e4, true, bf);
  linear("cuda.cublaslt", "nano3 in_proj", 10304, 2688, e4, true, bf);
  linear("cuda.small_m", "nano3 in_proj", 10304, 2688, e4, false, bf);
  linear("cuda.small_m", "nano3 shared up", 3712, 2688, e4, true, bf);
  linear("cuda.small_m", "nano3 out_proj", 2688, 4096, e4, true, bf);
  // The FP8 GEMV (tensor cores), the decode choice for e4m3 weights.
  linear("cuda.fp8_gemv", "nano3 in_proj", 10304, 2688, e4, true, bf);
  linear("cuda.fp8_gemv", "nano3 in_proj", 10304, 2688, e4, false, bf);
  linear("cuda.fp8_gemv", "nano3 shared up", 3712, 2688, e4, true, bf);
  linear("cuda.fp8_gemv", "nano3 shared down", 2688, 3712, e4, true, bf);
  linear("cuda.fp8_gemv", "nano3 out_proj", 2688, 4096, e4, true, bf);
  linear("cuda.fp8_gemv", "9b mlp up", 15680, 4480, e4, true, bf);
  linear("cuda.fp8_gemv", "9b mlp down", 4480, 15680, e4, true, bf);
  linear("cuda.fp8_gemv", "nano3 in_proj", 10304, 2688, e4, true, bf, 2);
  linear("cuda.fp8_gemv", "nano3 in_proj", 10304, 2688, e4, true, bf, 8);
  linear("cuda.cublaslt", "nano3 in_proj", 10304, 2688, e4, true, bf, 16);
  // The streamed FP8 GEMV (weights through shared memory), the decode choice since round 2.
  // cuda.fp8_stream takes only weights of >= 48 MiB (kFp8StreamMinWeightBytes): the 9b MLP.
  linear("cuda.fp8_stream", "9b mlp up", 15680, 4480, e4, true, bf);
  linear("cuda.fp8_stream", "9b mlp up", 15680, 4480, e4, false, bf);
  linear("cuda.fp8_stream", "9b mlp down", 4480, 15680, e4, true, bf);
  linear("cuda.small_m", "9b in_proj", 22656, 4480, bf, false, bf);
  linear("cuda.small_m", "9b mlp up", 15680, 4480, bf, false, bf);
  linear("cuda.small_m", "9b mlp down", 4480, 15680, bf, false, bf);
  linear("cuda.cublaslt", "9b mlp up", 15680, 4480, bf, false, bf);
  linear("cuda.small_m", "9b mlp up", 15680, 4480, e4, true, bf);
  // The small-M dispatch thresholds (batched decode): the GEMV-style kernels against cuBLASLt at
  // M = 1..16 on the 9B-v2 and Nano-3 shapes, bf16 and FP8 W8A8 (--only "M sweep"; run with
  // STRATA_SMALL_M_MAX_ROWS=8 STRATA_FP8_GEMV_MAX_ROWS=8 to time the GEMVs above their default
  // rows). Each shape's weights are made once for all its rows; a kernel that refuses a shape
  // gets a row that says why.
  const auto sweep = [&](const char* what, int64_t N, int64_t K, DType wt, DType out,
                         bool x_e4m3 = false) {
    auto w = std::make_shared<SharedWeights>();
    w->N = N;
    w->K = K;
    w->dt = wt;
    const bool fp8 = wt == e4;
    for (int64_t M : {1, 2, 3, 4, 6, 8, 12, 16})
      for (const char* kernel :
           fp8 ? std::vector<const char*>{"cuda.fp8_gemv", "cuda.fp8_stream", "cuda.cublaslt"}
               : std::vector<const char*>{"cuda.small_m", "cuda.cublaslt"}) {
        const int64_t gemv_rows = fp8 ? cuda::kFp8GemvMaxRowsW8A8 : cuda::kSmallMMaxRows;
        if (M > gemv_rows && std::string(kernel) != "cuda.cublaslt") continue;
        items.emplace_back(fmt::format("linear {}, {} (M sweep), {}, {}, {}{}, M={}", kernel, what,
                                       N, K, dtype_name(wt), x_e4m3 ? " e4m3 x" : "", M),
                           [=] {
                             try {
                               return bench_linear(kernel, what, N, K, wt, fp8, out, M, w.get(),
                                                   x_e4m3);
                             } catch (const std::exception& e) {
                               Row r;
                               r.kernel = fmt::format("linear {} (refused)", kernel);
                               r.shape = fmt::format("{} M={}: {}", what, M, e.what());
                               r.us = std::nan("");
                               return r;
                             }
                           });
      }
  };
  sweep("9b in_proj", 22656, 4480, bf, bf);
  sweep("9b out_proj", 4480, 10240, bf, bf);
  sweep("9b mlp up", 15680, 4480, bf, bf);
  sweep("9b mlp down", 4480, 15680, bf, bf);
  sweep("9b q_proj", 5120, 4480, bf, bf);
  sweep("9b lm_head", 131072, 4480, bf, f32);
  sweep("nano3 in_proj", 10304, 2688, bf, bf);
  sweep("nano3 lm_head", 131072, 2688, bf, f32);
  // Small bf16 matrices (the Nano-3 router and kv projection, the 9B-v2 kv projection), where
  // cuBLASLt took ~9-10 us a call at every M in the branch `rest3` profiles.
  sweep("nano3 router", 128, 2688, bf, f32);
  sweep("nano3 kv_proj", 256, 2688, bf, bf);
  sweep("9b kv_proj", 1024, 4480, bf, bf);
  // The small bf16 matrices at a batched-decode step and prefills (--only small-op).
  for (int64_t M : {8, 512, 2048}) {
    linear("cuda.cublaslt", "nano3 router (small-op)", 128, 2688, bf, false, f32, M);
    linear("cuda.cublaslt", "nano3 kv_proj (small-op)", 256, 2688, bf, false, bf, M);
  }
  sweep("nano3 in_proj", 10304, 2688, e4, bf);
  sweep("nano3 out_proj", 2688, 4096, e4, bf);
  sweep("nano3 shared up", 3712, 2688, e4, bf);
  sweep("nano3 shared down", 2688, 3712, e4, bf);
  sweep("9b mlp up", 15680, 4480, e4, bf);
  // The same with x already e4m3 (quantized by its producer): the GEMVs stage a copy.
  sweep("nano3 in_proj", 10304, 2688, e4, bf, true);
  sweep("nano3 out_proj", 2688, 4096, e4, bf, true);
  sweep("nano3 shared up", 3712, 2688, e4, bf, true);
  sweep("nano3 shared down", 2688, 3712, e4, bf, true);
  items.emplace_back("ssm_update nano3, 64, 64, 8, 128",
                     [] { return bench_ssm_update("nano3", 64, 64, 8, 128); });
  items.emplace_back("ssm_update 9b, 128, 80, 8, 128",
                     [] { return bench_ssm_update("9b", 128, 80, 8, 128); });
  items.emplace_back("conv_update nano3, 6144", [] { return bench_conv_update("nano3", 6144); });
  items.emplace_back("conv_update 9b, 12288", [] { return bench_conv_update("9b", 12288); });
  // Attention labels: kernel, model, q heads, kv heads, context.
  for (const char* kernel : {"cuda.decode", "cuda"}) {
    const auto attention = [&](const char* what, int64_t nh, int64_t nkv, int64_t ctx_len) {
      items.emplace_back(fmt::format("attention {} {}, {}, {}, {}", kernel, what, nh, nkv, ctx_len),
                         [=] { return bench_attention(kernel, what, nh, nkv, ctx_len); });
    };
    attention("nano3", 32, 2, 4096);
    attention("nano3", 32, 2, 32768);
    attention("9b", 40, 8, 4096);
    attention("9b", 40, 8, 32768);
  }
  // FP8 KV decode: the tensor-core flash kernel (split-K) against the general kernel.
  for (const char* kernel : {"cuda.flash", "cuda"})
    for (int64_t ctx_len : {int64_t{4096}, int64_t{32768}}) {
      items.emplace_back(fmt::format("attention fp8 {} nano3, 32, 2, {}", kernel, ctx_len),
                         [=] { return bench_attention(kernel, "nano3", 32, 2, ctx_len, true); });
      items.emplace_back(fmt::format("attention fp8 {} 9b, 40, 8, {}", kernel, ctx_len),
                         [=] { return bench_attention(kernel, "9b", 40, 8, ctx_len, true); });
    }
  // Prefill attention (--only "attention prefill"): one prompt of 512 and 2,048 tokens and a
  // batch of 8 x 512, both models' head layouts.
  struct PrefillShape {
    const char* what;
    int64_t nh, nkv, seqs, len;
  };
  for (const char* kernel : {"cuda.flash", "cuda"})
    for (const PrefillShape& s : {PrefillShape{"nano3", 32, 2, 1, 512},
                                  {"nano3", 32, 2, 1, 2048},
                                  {"nano3", 32, 2, 8, 512},
                                  {"9b", 40, 8, 1, 512},
                                  {"9b", 40, 8, 1, 2048},
                                  {"9b", 40, 8, 8, 512}})
      items.emplace_back(
          fmt::format("attention prefill {} {}, {}, {}, {}x{}", kernel, s.what, s.nh, s.nkv, s.seqs,
                      s.len),
          [=] { return bench_attention_prefill(kernel, s.what, s.nh, s.nkv, s.seqs, s.len); });
  moe("cuda.decode", bf, false);
  moe("cuda.decode", e4, true);
  moe("cuda.decode", e4, false);
  moe("cuda.fp8_decode", e4, true);
  moe("cuda.fp8_decode", e4, false);
  // Batched decode and prefill MoE (--only "moe tokens"): the swapped grouped kernel's variants
  // at T tokens; the FP8 decode kernel where it applies (T <= 8; a refused row says why).
  // cuda.grouped_swap and cuda.grouped_mma were measured in rounds 1-3 (docs/BENCHMARKS.md).
  for (int64_t T : {1, 2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096})
    for (const char* kernel :
         {"cuda.fp8_decode", "cuda.grouped_swap_split", "cuda.grouped_swap_cvt"}) {
      if (T > 8 && std::string(kernel) == "cuda.fp8_decode") continue;
      items.emplace_back(fmt::format("moe tokens {}, T={}", kernel, T),
                         [=] { return bench_moe_tokens(kernel, T); });
    }
  std::vector<Row> rows;
  for (const auto& [label, measure] : items) {
    if (!only.empty() && label.find(only) == std::string::npos) continue;
    const Row r = measure();
    print_row(r);
    if (r.us > 0) rows.push_back(r);
  }
  const std::vector<ScanRow> scan_rows = run_scan_rows(only);
  const std::vector<SmallRow> small_rows = run_small_rows(only);
  const std::vector<GemmSurveyRow> survey_rows = run_gemm_survey(only);
  if (!out_path.empty()) {
    std::ostringstream f;
    f << fmt::format("GPU: {}\n\n", cuda::device_description());
    f << "| kernel | shape | bytes (MB) | time (us) | GB/s | of 4.57 TB/s "
         "|\n|---|---|---|---|---|---|\n";
    for (const Row& r : rows) f << table_row(r);
    write_scan_rows(f, scan_rows);
    write_small_rows(f, small_rows);
    write_gemm_survey(f, survey_rows);
    io::write_file_atomic(out_path, f.str());
  }
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench-kernels", "Time the decode-critical CUDA kernels on Nano-3 / Nano-9B-v2 shapes");
  auto out = std::make_shared<std::string>();
  auto only = std::make_shared<std::string>();
  cmd->add_option("--out", *out, "also write the table as markdown to this file");
  cmd->add_option("--only", *only,
                  "run the rows whose label (function and arguments) contains this text");
  cmd->callback([out, only] { run_bench(*out, *only); });
}

}  // namespace

STRATA_COMMAND(setup);

}  // namespace strata::cli
