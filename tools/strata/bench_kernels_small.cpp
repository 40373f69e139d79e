#include "bench_kernels_small.h"

#include <cstdio>
#include <functional>
#include <utility>

#include "bench_kernels_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/ops.h"

namespace strata::cli::bench_kernels {
namespace {

using namespace strata::ops;

// Nano-3's widths (the tests' Nano3 constants).
constexpr int64_t kHidden = 2688, kInProj = 10304, kDInner = 4096, kConvDim = 6144, kGroups = 8;
constexpr int64_t kExperts = 128, kTopK = 6, kShared = 3712, kConvWidth = 4;

// Times `kernel` of op Args over `sets` argument sets made by make(i).
template <class Args>
SmallRow time_op(const char* kernel, std::string shape, double bytes,
                 const std::function<Args(int)>& make) {
  const int sets = sets_for(bytes);
  std::vector<Args> args;
  for (int i = 0; i < sets; ++i)
    args.push_back(make(i));
  const auto& k = kernel_named<Args>(kernel);
  std::string why;
  SmallRow r;
  r.kernel = fmt::format("{} {}", Args::kName, kernel);
  r.shape = std::move(shape);
  r.bytes = bytes;
  if (!k.supports(args[0], &why)) {
    r.shape += " (refused: " + why + ")";
    return r;  // us = 0: not timed
  }
  OpContext ctx;
  cuda::bind(ctx);
  r.us = time_launches(sets, [&](int i) { k.run(args[static_cast<size_t>(i)], ctx); });
  return r;
}

Tensor act(const Shape& s, float scale = 1.f) {
  return random_device(s, DType::BF16, scale);
}
Tensor empty(const Shape& s, DType dt = DType::BF16) {
  return Tensor::empty(s, dt, Device::Cuda);
}

// The outputs of a producer of a W8A8 input (ops.h QuantizedOut): act only, act and the e4m3
// copy (Both), or the copy only.
enum class Outs { Act, Both, QOnly };
const char* outs_name(Outs o) {
  return o == Outs::Act ? "" : o == Outs::Both ? " +out_q" : " out_q only";
}
double out_bytes(Outs o) {  // bytes written per value
  return o == Outs::Act ? 2.0 : o == Outs::Both ? 3.0 : 1.0;
}
template <class Args>
void set_outs(Args& a, Outs o, const Shape& s) {
  if (o != Outs::QOnly) a.out = Tensor::empty(s, DType::BF16, Device::Cuda);
  if (o == Outs::Act) return;
  a.out_q = Tensor::empty(s, DType::F8E4M3, Device::Cuda);
  a.out_q_scale = 2.5f / 448.f;
}

// x + residual (+ x2: the MoE block's add fused in), then the norm.
SmallRow rms_norm_bench(const char* kernel, int64_t T, bool x2, Outs o = Outs::Act) {
  const double bytes = ((x2 ? 4.0 : 3.0) * 2.0 + out_bytes(o)) * static_cast<double>(T * kHidden);
  return time_op<RmsNormArgs>(
      kernel,
      fmt::format("nano3 T={} H={} +residual{}{}", T, kHidden, x2 ? " +x2" : "", outs_name(o)),
      bytes, [=](int) {
        RmsNormArgs a;
        a.x = act(Shape{T, kHidden});
        if (x2) a.x2 = act(Shape{T, kHidden});
        a.residual = act(Shape{T, kHidden});
        a.weight = act(Shape{kHidden}, 1.5f);
        a.eps = 1e-5f;
        set_outs(a, o, Shape{T, kHidden});
        return a;
      });
}
SmallRow rms_norm_row(const char* kernel, int64_t T) {
  return rms_norm_bench(kernel, T, false);
}
SmallRow rms_norm_x2_row(const char* kernel, int64_t T) {
  return rms_norm_bench(kernel, T, true);
}
SmallRow rms_norm_q_row(const char* kernel, int64_t T) {  // before a Mamba layer (W8A8 in_proj)
  return rms_norm_bench(kernel, T, true, Outs::QOnly);
}
SmallRow rms_norm_both_row(const char* kernel, int64_t T) {  // before a MoE layer (shared up)
  return rms_norm_bench(kernel, T, true, Outs::Both);
}

SmallRow gated_bench(const char* kernel, int64_t T, Outs o) {
  const double bytes = (2.0 * 2.0 + out_bytes(o)) * static_cast<double>(T * kDInner);  // y, z, out
  return time_op<GatedRmsNormArgs>(
      kernel, fmt::format("nano3 T={} D={} groups={}{}", T, kDInner, kGroups, outs_name(o)), bytes,
      [=](int) {
        GatedRmsNormArgs a;
        a.y = act(Shape{T, kDInner});
        a.z = act(Shape{T, kInProj}).slice(1, 0, kDInner);  // z: in_proj's first columns
        a.weight = act(Shape{kDInner}, 1.5f);
        a.groups = kGroups;
        a.eps = 1e-5f;
        set_outs(a, o, Shape{T, kDInner});
        return a;
      });
}
SmallRow gated_row(const char* kernel, int64_t T) {
  return gated_bench(kernel, T, Outs::Act);
}
SmallRow gated_q_row(const char* kernel, int64_t T) {  // before a W8A8 out_proj
  return gated_bench(kernel, T, Outs::QOnly);
}

SmallRow conv_row(const char* kernel, int64_t T) {
  const double bytes = 2.0 * static_cast<double>(T * kConvDim) * 2.0;  // x, out
  return time_op<Conv1dPrefillArgs>(
      kernel, fmt::format("nano3 T={} C={} K={} one sequence", T, kConvDim, kConvWidth), bytes,
      [=](int) {
        Conv1dPrefillArgs a;
        a.x = act(Shape{T, kInProj}).slice(1, kDInner, kConvDim);  // xBC: in_proj's columns
        a.weight = act(Shape{kConvDim, kConvWidth}, 0.5f);
        a.bias = act(Shape{kConvDim}, 0.5f);
        a.conv_states = act(Shape{1, kConvWidth - 1, kConvDim});
        a.cu_seqlens = device_i32({0, static_cast<int32_t>(T)});
        a.slots = device_i32({0});
        a.has_initial = device_i32({1});
        a.out = empty(Shape{T, kConvDim});
        return a;
      });
}

SmallRow route_row(const char* kernel, int64_t T) {
  const double bytes = static_cast<double>(T) * (kExperts * 4.0 + kTopK * 8.0);
  return time_op<MoeRouteArgs>(
      kernel, fmt::format("nano3 T={} E={} top{}", T, kExperts, kTopK), bytes, [=](int) {
        MoeRouteArgs a;
        a.logits = random_device(Shape{T, kExperts}, DType::F32, 4.f);
        a.correction_bias = random_device(Shape{kExperts}, DType::F32, 0.3f);
        a.top_k = kTopK;
        a.routed_scaling_factor = 2.5f;
        a.ids = empty(Shape{T, kTopK}, DType::I32);
        a.weights = empty(Shape{T, kTopK}, DType::F32);
        return a;
      });
}

SmallRow add_row(const char* kernel, int64_t T) {
  const double bytes = 3.0 * static_cast<double>(T * kHidden) * 2.0;
  return time_op<AddArgs>(kernel, fmt::format("nano3 T={} N={}", T, kHidden), bytes, [=](int) {
    AddArgs a;
    a.a = act(Shape{T, kHidden});
    a.b = act(Shape{T, kHidden});
    a.out = empty(Shape{T, kHidden});
    return a;
  });
}

SmallRow relu2_row(const char* kernel, int64_t T) {
  const double bytes = 2.0 * static_cast<double>(T * kShared) * 2.0;
  return time_op<Relu2Args>(kernel, fmt::format("nano3 T={} N={} in place", T, kShared), bytes,
                            [=](int) {
                              Relu2Args a;
                              a.x = act(Shape{T, kShared}, 2.f);
                              a.out = a.x;
                              return a;
                            });
}
SmallRow relu2_q_row(const char* kernel, int64_t T) {  // before a W8A8 down projection
  const double bytes = 3.0 * static_cast<double>(T * kShared);
  return time_op<Relu2Args>(kernel, fmt::format("nano3 T={} N={} out_q only", T, kShared), bytes,
                            [=](int) {
                              Relu2Args a;
                              a.x = act(Shape{T, kShared}, 2.f);
                              set_outs(a, Outs::QOnly, Shape{T, kShared});
                              return a;
                            });
}

}  // namespace

std::vector<SmallRow> run_small_rows(const std::string& only) {
  std::vector<std::pair<std::string, std::function<SmallRow()>>> items;
  for (int64_t T :
       {int64_t{1}, int64_t{8}, int64_t{32}, int64_t{128}, int64_t{512}, int64_t{2048}}) {
    const auto add = [&](const char* op, const char* kernel,
                         SmallRow (*row)(const char*, int64_t)) {
      items.emplace_back(fmt::format("small-op {} {}, T={}", op, kernel, T),
                         [=] { return row(kernel, T); });
    };
    add("rms_norm", "cuda", rms_norm_row);
    add("rms_norm+x2", "cuda", rms_norm_x2_row);
    add("gated_rms_norm", "cuda.warp", gated_row);
    add("gated_rms_norm", "cuda", gated_row);
    add("conv1d_prefill", "cuda", conv_row);
    add("moe_route", "cuda.warp", route_row);
    add("moe_route", "cuda", route_row);
    add("add", "cuda", add_row);
    add("relu2", "cuda", relu2_row);
    add("rms_norm+x2 out_q only", "cuda", rms_norm_q_row);
    add("rms_norm+x2 +out_q", "cuda", rms_norm_both_row);
    add("gated_rms_norm out_q only", "cuda.warp", gated_q_row);
    add("gated_rms_norm out_q only", "cuda", gated_q_row);
    add("relu2 out_q only", "cuda", relu2_q_row);
  }
  std::vector<SmallRow> rows;
  for (const auto& [label, measure] : items) {
    if (!only.empty() && label.find(only) == std::string::npos) continue;
    const SmallRow r = measure();
    print_row(r);
    if (r.us > 0) rows.push_back(r);
  }
  return rows;
}

void write_small_rows(std::ostringstream& f, const std::vector<SmallRow>& rows) {
  if (rows.empty()) return;
  f << "\n| small op kernel | shape | bytes (MB) | time (us) | GB/s | of 4.57 TB/s |\n"
       "|---|---|---|---|---|---|\n";
  for (const SmallRow& r : rows) f << table_row(r);
}

}  // namespace strata::cli::bench_kernels
