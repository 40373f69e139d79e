// Registrations of moe_route and moe_experts on the CUDA backend. moe_experts' kernels are
// registered here in order (the first that supports the arguments runs): the FP8 decode kernel
// (e4m3 experts, T <= 8; W8A8 experts the swapped kernel takes only up to decode_max_tokens),
// the decode kernel (same limits), the grouped kernel with the weights on mma's M side (bf16 or
// W8A8, T up to kSwapMaxTokens: few pairs per expert) in its variants (moe.h kSwap* flags: split-K
// first, up to kSplitMaxTokens, then cuda.grouped_swap_cvt, then the first version for A/B
// runs), the grouped kernel with shared-memory tiles on the tensor cores (bf16 or W8A8, any T),
// then the grouped kernel with f32 GEMMs on CUDA cores (every dtype and shape). Each can be
// switched off for A/B comparisons with STRATA_CUDA_DISABLE_KERNELS=moe_experts:cuda.NAME[,...].
#ifdef STRATA_HAVE_CUDA
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/linear.h"
#include "ops/cuda/moe.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::MoeExpertsArgs;
using ops::MoeRouteArgs;

constexpr int64_t kDecodeMaxTokens = 8;
// Tokens up to which the swapped grouped GEMMs run (above: the shared-memory tiles). At top-6 of
// 128 experts, T tokens give ~T / 21 pairs per expert. Measured on the H200 (Nano-3 W8A8 MoE op
// per layer, docs/BENCHMARKS.md issue 10 "moe3"): cuda.grouped_swap_cvt 462 / 754 / 1,315 /
// 2,470 us against cuda.grouped_mma 971 / 1,064 / 2,046 / 3,607 us at 512 / 1,024 / 2,048 /
// 4,096 tokens (above 4,096 not measured). Below, T >= 2 (decode_max_tokens).
constexpr int64_t kSwapMaxTokens = 4096;
// Tokens up to which cuda.grouped_swap_split (the split-K variant, registered before
// cuda.grouped_swap_cvt) runs. Measured on the H200 (docs/BENCHMARKS.md, issue 10, "moe4";
// bench-kernels "moe tokens", % of the read ceiling of the distinct experts): split / cvt 49.5 /
// 44.8% at T = 2, 66.6 / 62.2% at 6, 69.0 / 62.9% at 8, 77.7 / 77.4% at 16, 81.0 / 79.7% at 32,
// then equal within noise up to 128 (79.7 / 80.1% at 64) and slower from 256 (70.6 / 71.9%; 56.0
// / 61.0% at 512: half the work per block costs more than the finer waves save once the tiles
// fill the GPU several times).
constexpr int64_t kSplitMaxTokens = 32;

bool route_supports(const MoeRouteArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.logits, "logits")
      .on_device(a.correction_bias, "correction_bias")
      .on_device(a.ids, "ids");
  c.on_device(a.weights, "weights").dtype(a.logits, DType::F32, "logits");
  c.dtype(a.correction_bias, DType::F32, "correction_bias").dtype(a.ids, DType::I32, "ids");
  c.dtype(a.weights, DType::F32, "weights").rows(a.logits, -1, -1, "logits");
  if (!c) return false;
  const int64_t T = a.logits.dim(0), E = a.logits.dim(1);
  c.contiguous(a.correction_bias, Shape{E}, "correction_bias");
  c.rows(a.ids, T, a.top_k, "ids").rows(a.weights, T, a.top_k, "weights");
  c.require(a.n_group >= 1 && E % a.n_group == 0 && a.topk_group >= 1 && a.topk_group <= a.n_group,
            fmt::format("n_group {} must divide {} experts and topk_group {} be in 1..n_group",
                        a.n_group, E, a.topk_group));
  c.require(a.top_k >= 1 && a.top_k <= E / a.n_group * a.topk_group,
            fmt::format("top_k {} must be in 1..{} (experts in the kept groups)", a.top_k,
                        E / a.n_group * a.topk_group));
  c.require(E <= 4096, fmt::format("{} experts (at most 4096)", E));
  return c;
}
MoeRouteLaunch route_launch_of(const MoeRouteArgs& a) {
  MoeRouteLaunch p;
  p.logits = mat_of(a.logits);
  p.bias = a.correction_bias.data<float>();
  p.top_k = a.top_k;
  p.n_group = a.n_group;
  p.topk_group = a.topk_group;
  p.norm_topk_prob = a.norm_topk_prob;
  p.routed_scaling_factor = a.routed_scaling_factor;
  p.ids = mat_of(a.ids);
  p.weights = mat_of(a.weights);
  return p;
}
void route_run(const MoeRouteArgs& a, OpContext& ctx) {
  launch_moe_route(route_launch_of(a), stream_of(ctx));
}
// One warp per token (moe_route.cu): up to 256 experts, no group masking.
bool route_warp_supports(const MoeRouteArgs& a, std::string* why) {
  if (!route_supports(a, why)) return false;
  ArgCheck c(why);
  c.require(!kernel_disabled(MoeRouteArgs::kName, "cuda.warp"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  c.require(a.logits.dim(0) >= warp_form_min_rows(),
            fmt::format("{} tokens (the warp form from {})", a.logits.dim(0), warp_form_min_rows()));
  c.require(
      moe_route_warp_fits(route_launch_of(a)),
      fmt::format("{} experts (at most {}), top_k {} (at most 32), n_group {} with topk_group "
                  "{} (group masking: the block kernel)",
                  a.logits.dim(1), 32 * kRouteWarpMaxPerLane, a.top_k, a.n_group, a.topk_group));
  return c;
}
void route_warp_run(const MoeRouteArgs& a, OpContext& ctx) {
  launch_moe_route_warp(route_launch_of(a), stream_of(ctx));
}

// ---- experts ----

// One expert's checks. Names and messages are formatted only when `why` is set: supports() runs on
// every eager MoE call for every kernel it tries (128 experts), so the passing path builds no
// strings; a failing expert is checked again with `why` to explain the refusal.
bool expert_ok(const MoeExpertsArgs& a, size_t e, int64_t I, int64_t H, DType wt, bool w8a8,
               std::string* why) {
  const auto& up = (*a.up)[e];
  const auto& down = (*a.down)[e];
  std::string ue, de;
  if (why) {
    ue = fmt::format("expert {} up weight", e);
    de = fmt::format("expert {} down weight", e);
  }
  const char* un = why ? ue.c_str() : "up weight";
  const char* dn = why ? de.c_str() : "down weight";
  ArgCheck c(why);
  c.on_device(up.weight, un).on_device(down.weight, dn);
  c.dtype(up.weight, wt, un).dtype(down.weight, wt, dn);
  c.contiguous(up.weight, Shape{I, H}, un).contiguous(down.weight, Shape{H, I}, dn);
  if (!c || wt != DType::F8E4M3) return c;
  if (!(up.weight_scale > 0.f && down.weight_scale > 0.f))
    return c.fail(why ? fmt::format("expert {}: fp8 weight scales must be > 0", e) : "");
  if (!((up.input_scale > 0.f) == w8a8 && (down.input_scale > 0.f) == w8a8))
    return c.fail(why ? fmt::format("expert {}: input scales must be set for every expert (W8A8) "
                                    "or for none (W8A16)",
                                    e)
                      : "");
  return c;
}

bool experts_common(const MoeExpertsArgs& a, std::string* why) {
  ArgCheck c(why);
  c.require(a.up != nullptr && a.down != nullptr, "up/down expert lists are missing");
  if (!c) return false;
  const auto& up = *a.up;
  const auto& down = *a.down;
  if (up.empty() || up.size() != down.size())
    return c.fail(fmt::format("{} up and {} down experts (need the same non-zero count)", up.size(),
                              down.size()));
  c.on_device(a.x, "x")
      .on_device(a.ids, "ids")
      .on_device(a.weights, "weights")
      .on_device(a.out, "out");
  c.act(a.x, "x").same_dtype(a.x, a.out, "x", "out").dtype(a.ids, DType::I32, "ids");
  c.dtype(a.weights, DType::F32, "weights").rows(a.x, -1, -1, "x");
  if (!c) return false;
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  c.rows(a.ids, T, -1, "ids");
  if (!c) return false;
  c.rows(a.weights, T, a.ids.dim(1), "weights").rows(a.out, T, H, "out");
  if (!c) return false;
  if (up[0].weight.rank() != 2)
    return c.fail(fmt::format("expert 0 up weight {} must be [I, H]", up[0].weight.str()));
  const int64_t I = up[0].weight.dim(0);
  const DType wt = up[0].weight.dtype();
  const bool w8a8 = wt == DType::F8E4M3 && up[0].input_scale > 0.f;
  for (size_t e = 0; e < up.size(); ++e)
    if (!expert_ok(a, e, I, H, wt, w8a8, nullptr)) return expert_ok(a, e, I, H, wt, w8a8, why);
  const DType xt = a.x.dtype();
  if (!((xt == DType::F32 && wt == DType::F32) ||
        (xt == DType::BF16 && (wt == DType::BF16 || wt == DType::F8E4M3))))
    return c.fail(fmt::format("x {} with expert weights {} is not a supported combination",
                              dtype_name(xt), dtype_name(wt)));
  c.require(a.x.dim(0) * a.ids.dim(1) < (int64_t{1} << 31), "too many (token, expert) pairs");
  return c;
}

// Device copies of the experts' pointers and scales, built once per expert list in each device
// context and rebuilt only when the list changes (so steady-state steps upload nothing).
struct TableCache {
  std::mutex mu;
  struct Entry {
    std::vector<char> host;  // the bytes last uploaded
    Tensor dev;
  };
  std::map<std::pair<const void*, const void*>, Entry> entries;
};

const char kTableCacheKey = 0;

ExpertTables tables_for(const MoeExpertsArgs& a, DeviceContext& dc) {
  TableCache* cache =
      &dc.local<TableCache>(&kTableCacheKey, [] { return std::make_shared<TableCache>(); });
  const auto& up = *a.up;
  const auto& down = *a.down;
  const size_t E = up.size();
  std::vector<char> bytes(E * 2 * sizeof(void*) + E * 4 * sizeof(float));
  auto* ptrs = reinterpret_cast<const void**>(bytes.data());
  auto* scales = reinterpret_cast<float*>(bytes.data() + E * 2 * sizeof(void*));
  for (size_t e = 0; e < E; ++e) {
    ptrs[e] = up[e].weight.raw();
    ptrs[E + e] = down[e].weight.raw();
    const bool fp8 = up[e].weight.dtype() == DType::F8E4M3;
    scales[e] = fp8 ? up[e].weight_scale : 1.f;
    scales[E + e] = up[e].input_scale;
    scales[2 * E + e] = fp8 ? down[e].weight_scale : 1.f;
    scales[3 * E + e] = down[e].input_scale;
  }
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& entry = cache->entries[{a.up, a.down}];
  if (entry.host != bytes) {
    Tensor host = Tensor::empty(Shape{static_cast<int64_t>(bytes.size())}, DType::U8, Device::Host);
    std::memcpy(host.raw(), bytes.data(), bytes.size());
    entry.dev = host.to(Device::Cuda);
    entry.host = std::move(bytes);
  }
  char* base = static_cast<char*>(entry.dev.raw());
  ExpertTables t;
  t.up = reinterpret_cast<const void* const*>(base);
  t.down = reinterpret_cast<const void* const*>(base + E * sizeof(void*));
  auto* fs = reinterpret_cast<const float*>(base + E * 2 * sizeof(void*));
  t.up_scale = fs;
  t.up_in = fs + E;
  t.down_scale = fs + 2 * E;
  t.down_in = fs + 3 * E;
  return t;
}

bool rows_vectorizable(const std::vector<ops::LinearWeight>& ws, int64_t K, size_t x_elem,
                       int64_t ldx) {
  const size_t we = dtype_size(ws[0].weight.dtype());
  const int64_t E = 16 / static_cast<int64_t>(we);
  const int64_t xb = std::min<int64_t>(16, E * static_cast<int64_t>(x_elem));
  if (K % E != 0 || (K * static_cast<int64_t>(we)) % 16 != 0 ||
      (ldx * static_cast<int64_t>(x_elem)) % xb != 0)
    return false;
  for (const auto& w : ws)
    if (reinterpret_cast<uintptr_t>(w.weight.raw()) % 16 != 0) return false;
  return true;
}

// The launch's dtypes, shapes and alignment flags (no device tables: cheap, for supports()).
MoeExpertsLaunch launch_shape_of(const MoeExpertsArgs& a) {
  MoeExpertsLaunch p;
  p.x = mat_of(a.x);
  p.experts = static_cast<int64_t>(a.up->size());
  p.inter = (*a.up)[0].weight.dim(0);
  p.hidden = a.x.dim(1);
  p.top_k = a.ids.dim(1);
  p.wt = (*a.up)[0].weight.dtype();
  p.w8a8 = p.wt == DType::F8E4M3 && (*a.up)[0].input_scale > 0.f;
  // Decode x rows come from x (or e4m3 copies); h rows from 256-aligned scratch of width I.
  const size_t act = dtype_size(a.x.dtype());
  p.vec_up =
      p.w8a8 ? rows_vectorizable(*a.up, p.hidden, 1, p.hidden)
             : rows_vectorizable(*a.up, p.hidden, act, a.x.dim(0) > 1 ? a.x.stride(0) : p.hidden) &&
                   reinterpret_cast<uintptr_t>(a.x.raw()) % 16 == 0;
  p.vec_down = rows_vectorizable(*a.down, p.inter, p.w8a8 ? 1 : act, p.inter);
  return p;
}

MoeExpertsLaunch launch_of(const MoeExpertsArgs& a, DeviceContext& dc) {
  MoeExpertsLaunch p = launch_shape_of(a);
  p.tables = tables_for(a, dc);
  p.ids = mat_of(a.ids);
  p.weights = mat_of(a.weights);
  p.out = mat_of(a.out);
  return p;
}

void experts_run(const MoeExpertsArgs& a, OpContext& ctx, bool grouped, bool mma = false,
                 bool swap = false, int swap_variant = 0) {
  MoeExpertsLaunch p = launch_of(a, context_of(ctx));
  p.mma = mma;
  p.swap = swap;
  p.swap_variant = swap_variant;
  Tensor scratch = Tensor::empty(Shape{static_cast<int64_t>(moe_scratch_bytes(p, grouped))},
                                 DType::U8, Device::Cuda);
  p.scratch = scratch.raw();
  if (grouped)
    launch_moe_grouped(p, context_of(ctx).index_errors(), stream_of(ctx));
  else
    launch_moe_gemv(p, context_of(ctx).index_errors(), stream_of(ctx));
}

// Tokens up to which the decode kernels (cuda.fp8_decode, cuda.decode: one pass per (token,
// expert) pair) take the experts: kDecodeMaxTokens, except W8A8 e4m3 experts that the swapped
// grouped kernel can take, where it is the crossover against cuda.grouped_swap_split (which reads
// each distinct expert once, for all of its pairs). Measured on the H200, Nano-3 W8A8 MoE op per
// layer in a CUDA graph (docs/BENCHMARKS.md, issue 10, "moe4"; bench-kernels "moe tokens", us and
// % of the read ceiling of the distinct experts): fp8_decode 34.8 (37.6%) / 56.3 (38.8%) / 78.1
// (50.4%) / 99.1 / 182.3 (49.1%) at T = 1 / 2 / 3 / 4 / 8 against the grouped kernel's 39.5
// (33.2%) / 53.0 (49.5%) / 68.3 / 82.3 / 136.0 (69.0%); the batch-8 graph step 6.27 -> 4.93 ms.
// STRATA_MOE_DECODE_MAX_TOKENS overrides it (1..8, read once; 8 = every T <= 8 on the decode
// kernels, as before round 4).
constexpr int64_t kDecodeDefaultTokensW8A8 = 1;
int64_t decode_max_tokens_w8a8() {
  static const int64_t v = [] {
    const char* e = std::getenv("STRATA_MOE_DECODE_MAX_TOKENS");
    const long long n = e ? std::atoll(e) : 0;
    return n >= 1 && n <= kDecodeMaxTokens ? static_cast<int64_t>(n) : kDecodeDefaultTokensW8A8;
  }();
  return v;
}
int64_t decode_max_tokens(const MoeExpertsArgs& a) {
  const bool w8a8 = (*a.up)[0].weight.dtype() == DType::F8E4M3 && (*a.up)[0].input_scale > 0.f;
  if (!w8a8 || a.x.dim(0) <= decode_max_tokens_w8a8()) return kDecodeMaxTokens;
  return moe_mma_unsupported(launch_shape_of(a)).empty() ? decode_max_tokens_w8a8()
                                                         : kDecodeMaxTokens;
}

bool fp8_decode_supports(const MoeExpertsArgs& a, std::string* why) {
  if (!experts_common(a, why)) return false;
  ArgCheck c(why);
  const int64_t T = a.x.dim(0), H = a.x.dim(1), I = (*a.up)[0].weight.dim(0);
  const bool w8a8 = (*a.up)[0].input_scale > 0.f;
  if ((*a.up)[0].weight.dtype() != DType::F8E4M3)
    return c.fail(fmt::format("expert weights {} are not e4m3", (*a.up)[0].weight.str()));
  if (T > decode_max_tokens(a))
    return c.fail(fmt::format("T = {} above the decode kernels' {} for these experts", T,
                              decode_max_tokens(a)));
  c.require(!kernel_disabled(MoeExpertsArgs::kName, "cuda.fp8_decode"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  if (!c) return false;
  if (H % 16 != 0 || I % 16 != 0)
    return c.fail(
        fmt::format("H = {} and I = {} must be multiples of 16 (16-byte weight rows)", H, I));
  if (!(reinterpret_cast<uintptr_t>(a.x.raw()) % 16 == 0 && (T == 1 || a.x.stride(0) % 8 == 0)))
    return c.fail(fmt::format("x rows must be 16-byte aligned (row stride {})", a.x.stride(0)));
  for (size_t e = 0; e < a.up->size(); ++e)
    if (reinterpret_cast<uintptr_t>((*a.up)[e].weight.raw()) % 16 != 0 ||
        reinterpret_cast<uintptr_t>((*a.down)[e].weight.raw()) % 16 != 0)
      return c.fail(fmt::format("expert {} weights must be 16-byte aligned", e));
  const int64_t stage = std::max(moe_fp8_stage_bytes(H, w8a8), moe_fp8_stage_bytes(I, w8a8));
  if (stage > fp8_gemv_max_stage_bytes())
    return c.fail(fmt::format("a staged row of x or h takes {} bytes of shared memory (at most {})",
                              stage, fp8_gemv_max_stage_bytes()));
  return c;
}
void fp8_decode_run(const MoeExpertsArgs& a, OpContext& ctx) {
  MoeExpertsLaunch p = launch_of(a, context_of(ctx));
  Tensor scratch =
      Tensor::empty(Shape{static_cast<int64_t>(moe_fp8_scratch_bytes(p))}, DType::U8, Device::Cuda);
  p.scratch = scratch.raw();
  launch_moe_fp8_decode(p, context_of(ctx).index_errors(), stream_of(ctx));
}

bool gemv_supports(const MoeExpertsArgs& a, std::string* why) {
  if (!experts_common(a, why)) return false;
  ArgCheck c(why);
  if (a.x.dim(0) > decode_max_tokens(a))
    return c.fail(fmt::format("T = {} above the decode kernels' {} for these experts", a.x.dim(0),
                              decode_max_tokens(a)));
  c.require(!kernel_disabled(MoeExpertsArgs::kName, "cuda.decode"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  return c;
}
void gemv_run(const MoeExpertsArgs& a, OpContext& ctx) {
  experts_run(a, ctx, false);
}

// The swapped kernel's variants (kSwap* flags, moe.h), each its own registered name so one binary
// A/B-tests them (bench-kernels rows, STRATA_CUDA_DISABLE_KERNELS).
constexpr const char* swap_name(int variant) {
  return variant == kSwapL2CvtSplit ? "cuda.grouped_swap_split"
         : variant == kSwapL2Cvt    ? "cuda.grouped_swap_cvt"
                                    : "cuda.grouped_swap";
}
// Tokens up to which the split-K variant runs (above: cuda.grouped_swap_cvt).
constexpr int64_t swap_max_tokens(int variant) {
  return variant == kSwapL2CvtSplit ? kSplitMaxTokens : kSwapMaxTokens;
}
template <int V>
bool grouped_swap_supports(const MoeExpertsArgs& a, std::string* why) {
  if (!experts_common(a, why)) return false;
  ArgCheck c(why);
  const std::string reason = moe_mma_unsupported(launch_shape_of(a));
  if (!reason.empty()) return c.fail(reason);
  if (a.x.dim(0) > swap_max_tokens(V))
    return c.fail(fmt::format("T = {} above {}'s {} (many pairs per expert)", a.x.dim(0),
                              swap_name(V), swap_max_tokens(V)));
  c.require(!kernel_disabled(MoeExpertsArgs::kName, swap_name(V)),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  return c;
}
template <int V>
void grouped_swap_run(const MoeExpertsArgs& a, OpContext& ctx) {
  experts_run(a, ctx, true, true, true, V);
}

bool grouped_mma_supports(const MoeExpertsArgs& a, std::string* why) {
  if (!experts_common(a, why)) return false;
  ArgCheck c(why);
  const std::string reason = moe_mma_unsupported(launch_shape_of(a));
  if (!reason.empty()) return c.fail(reason);
  c.require(!kernel_disabled(MoeExpertsArgs::kName, "cuda.grouped_mma"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  return c;
}
void grouped_mma_run(const MoeExpertsArgs& a, OpContext& ctx) {
  experts_run(a, ctx, true, true);
}

bool grouped_supports(const MoeExpertsArgs& a, std::string* why) {
  return experts_common(a, why);
}
void grouped_run(const MoeExpertsArgs& a, OpContext& ctx) {
  experts_run(a, ctx, true);
}

}  // namespace

STRATA_REGISTER_KERNEL(MoeRouteArgs, "cuda.warp", Device::Cuda, route_warp_supports,
                       route_warp_run);
STRATA_REGISTER_KERNEL(MoeRouteArgs, "cuda", Device::Cuda, route_supports, route_run);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, "cuda.fp8_decode", Device::Cuda, fp8_decode_supports,
                       fp8_decode_run);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, "cuda.decode", Device::Cuda, gemv_supports, gemv_run);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, swap_name(kSwapL2CvtSplit), Device::Cuda,
                       grouped_swap_supports<kSwapL2CvtSplit>, grouped_swap_run<kSwapL2CvtSplit>);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, swap_name(kSwapL2Cvt), Device::Cuda,
                       grouped_swap_supports<kSwapL2Cvt>, grouped_swap_run<kSwapL2Cvt>);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, swap_name(0), Device::Cuda, grouped_swap_supports<0>,
                       grouped_swap_run<0>);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, "cuda.grouped_mma", Device::Cuda, grouped_mma_supports,
                       grouped_mma_run);
STRATA_REGISTER_KERNEL(MoeExpertsArgs, "cuda.grouped", Device::Cuda, grouped_supports, grouped_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
