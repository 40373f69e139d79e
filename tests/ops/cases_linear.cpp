// Cases: linear in bf16, f32 and FP8 (W8A16, and W8A8 on inputs that are exactly e4m3 values
// times a power-of-two input scale, where W8A8 and the host's W8A16 compute the same sums; and
// W8A8 on inputs off the e4m3 grid, where the reference multiplies the activations the device's
// quantizer makes, e4m3(x / input_scale) * input_scale, saturating at +-448: rounding and
// saturation are both exercised).
// FP8 covers each kernel's regimes: the FP8 GEMV (K % 16 == 0, W8A8 T <= 8, W8A16 T <= 16: one
// or two N tiles, one or several load batches per warp, a partial last chunk, N not a multiple
// of 16, strided x, weights over every code and over the subnormals), the small-M kernel's
// fallbacks (odd K, staged x beyond the GEMV's shared memory) and cuBLASLt above; the W8A8
// quantize pass before cuBLASLt both vectorized (bf16, K % 8 == 0, aligned rows, views
// included) and per element (odd K).
#include <cmath>

#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

enum class WKind { Act, F32Router, Fp8W8A16, Fp8W8A8, Fp8W8A8OffGrid };
// How e4m3 weights are drawn: values spread over the range (fp8_weight), every code, or only
// the subnormal and smallest normal codes (fp8_codes).
enum class Codes { Spread, All, Small };

struct S {
  const char* name;
  int64_t T, N, K;
  DType act;
  WKind kind;
  DType out;
  bool x_view;
  bool supported;
  Codes codes = Codes::Spread;
};

Tensor fp8_of(const S& s, Rng& rng, float wstd, float* scale) {
  if (s.codes == Codes::Spread) return fp8_weight(rng, Shape{s.N, s.K}, wstd, scale);
  return fp8_codes(rng, Shape{s.N, s.K}, s.codes == Codes::Small, wstd, scale);
}

std::string kind_name(WKind k) {
  switch (k) {
    case WKind::Act:
      return "act weight";
    case WKind::F32Router:
      return "f32 weight";
    case WKind::Fp8W8A16:
      return "fp8 W8A16";
    case WKind::Fp8W8A8:
      return "fp8 W8A8";
    case WKind::Fp8W8A8OffGrid:
      return "fp8 W8A8 off-grid x";
  }
  return "";
}

// W8A8 on x ~ N(0, 1) stored in act (off the e4m3 grid). input_scale 2.5 / 448: every |x| above
// 2.5 saturates to +-448 (about 1% of x). The host reference gets the activations the device
// multiplies, e4m3_sat(x / s) * s in f32 (W8A16 on them is W8A8); the device gets x itself.
Outcome run_linear_off_grid(const S& s, Rng& rng) {
  LinearArgs a;
  const float wstd = 1.f / std::sqrt(static_cast<float>(s.K));
  const float in_scale = 2.5f / 448.f;
  const Tensor x = normal_tensor(rng, Shape{s.T, s.K}, s.act, 1.f);
  Tensor xq = Tensor::empty(Shape{s.T, s.K}, DType::F32);
  int64_t saturated = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = load_as_f32(x.raw(), x.dtype(), static_cast<size_t>(i)) / in_scale;
    saturated += std::fabs(v) > 448.f ? 1 : 0;
    xq.data<float>()[i] = fp8e4m3_to_f32(fp8e4m3_from_f32_sat(v)) * in_scale;
  }
  if (saturated == 0) {
    Outcome o;
    o.status = Outcome::Failed;
    o.detail = "no input saturates: the case misses its purpose";
    return o;
  }
  a.x = xq;
  a.w.weight = fp8_of(s, rng, wstd, &a.w.weight_scale);
  a.w.input_scale = in_scale;
  a.out = Tensor::empty(Shape{s.T, s.N}, s.out);
  Tolerance tol;  // one f32 sum of K products of the same e4m3 values, one rounding to out
  tol.reduction = s.K;
  tol.fp8_mma = true;  // the cuBLASLt FP8 GEMM accumulates below f32
  // The device quantizes the original activations itself.
  const std::function<void(LinearArgs&, std::vector<std::shared_ptr<void>>&)> original_x =
      [x](LinearArgs& dev, std::vector<std::shared_ptr<void>>&) { dev.x = x.to(Device::Cuda); };
  return run_case(a, s.act, tol, original_x);
}

Outcome run_linear(const S& s, Rng& rng) {
  if (s.kind == WKind::Fp8W8A8OffGrid) return run_linear_off_grid(s, rng);
  LinearArgs a;
  const float wstd = 1.f / std::sqrt(static_cast<float>(s.K));
  if (s.kind == WKind::Fp8W8A8) {
    // x = e4m3 code * 2^-3: exactly what the device's quantizer recovers.
    const float in_scale = 0.125f;
    Tensor wide = Tensor::empty(Shape{s.T, s.K + (s.x_view ? 16 : 0)}, s.act);
    for (int64_t i = 0; i < wide.numel(); ++i)
      store_from_f32(wide.raw(), s.act, static_cast<size_t>(i),
                     fp8e4m3_to_f32(fp8e4m3_from_f32_sat(rng.normal() * 16.f)) * in_scale);
    a.x = wide.slice(1, s.x_view ? 16 : 0, s.K);
    a.w.weight = fp8_of(s, rng, wstd, &a.w.weight_scale);
    a.w.input_scale = in_scale;
  } else {
    a.x = s.x_view ? wide_rows(rng, s.T, s.K, 24, 8, s.act, 1.f)
                   : normal_tensor(rng, Shape{s.T, s.K}, s.act, 1.f);
    if (s.kind == WKind::Fp8W8A16)
      a.w.weight = fp8_of(s, rng, wstd, &a.w.weight_scale);
    else
      a.w.weight = normal_tensor(rng, Shape{s.N, s.K},
                                 s.kind == WKind::F32Router ? DType::F32 : s.act, wstd);
  }
  a.out = Tensor::empty(Shape{s.T, s.N}, s.out);
  Tolerance tol;  // one f32 sum of K products, one rounding to out
  tol.reduction = s.K;
  tol.fp8_mma = s.kind == WKind::Fp8W8A8;  // the cuBLASLt FP8 GEMM accumulates below f32
  return run_case(a, s.act, tol);
}

std::vector<OpCase> linear_cases() {
  const DType bf = DType::BF16, f32 = DType::F32;
  const S shapes[] = {
      {"nano3 in_proj", 1, Nano3::in_proj, Nano3::hidden, bf, WKind::Act, bf, false, true},
      {"nano3 in_proj", 3, Nano3::in_proj, Nano3::hidden, bf, WKind::Act, bf, false, true},
      {"nano3 in_proj", 17, Nano3::in_proj, Nano3::hidden, bf, WKind::Act, bf, false, true},
      {"nano3 in_proj", 130, Nano3::in_proj, Nano3::hidden, bf, WKind::Act, bf, false, true},
      {"nano3 out_proj", 1, Nano3::hidden, Nano3::d_inner, bf, WKind::Act, bf, false, true},
      {"nano3 out_proj", 300, Nano3::hidden, Nano3::d_inner, bf, WKind::Act, bf, true, true},
      {"nano3 shared up", 8, Nano3::shared_width, Nano3::hidden, bf, WKind::Act, bf, false, true},
      {"nano3 lm_head", 1, Nano3::vocab, Nano3::hidden, bf, WKind::Act, f32, false, true},
      {"nano3 router", 3, Nano3::experts, Nano3::hidden, bf, WKind::F32Router, f32, false, true},
      {"nano3 router", 17, Nano3::experts, Nano3::hidden, bf, WKind::F32Router, f32, false, true},
      {"9b in_proj", 1, Nano9B::in_proj, Nano9B::hidden, bf, WKind::Act, bf, false, true},
      {"9b in_proj", 8, Nano9B::in_proj, Nano9B::hidden, bf, WKind::Act, bf, false, true},
      {"9b mlp up", 1, Nano9B::mlp, Nano9B::hidden, bf, WKind::Act, bf, false, true},
      {"9b mlp down", 2, Nano9B::hidden, Nano9B::mlp, bf, WKind::Act, bf, false, true},
      {"odd", 1, 131, 257, bf, WKind::Act, bf, true, true},
      {"odd", 3, 131, 257, bf, WKind::Act, bf, false, true},
      {"odd", 17, 131, 257, bf, WKind::Act, bf, true, true},
      {"odd", 300, 1031, 131, bf, WKind::Act, bf, false, true},
      {"f32 nano3 out_proj", 1, Nano3::hidden, Nano3::d_inner, f32, WKind::Act, f32, false, true},
      {"f32 odd", 1, 257, 1031, f32, WKind::Act, f32, true, true},
      {"f32 odd", 17, 257, 1031, f32, WKind::Act, f32, false, true},
      {"f32", 130, 1024, 768, f32, WKind::Act, f32, true, true},
      {"nano3 in_proj", 1, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A16, bf, false, true},
      {"nano3 in_proj", 4, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A16, bf, false, true},
      {"nano3 in_proj", 1, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 in_proj", 17, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 expert up", 300, Nano3::expert_width, Nano3::hidden, bf, WKind::Fp8W8A8, bf, true,
       true},
      {"9b mlp down", 8, Nano9B::hidden, Nano9B::mlp, bf, WKind::Fp8W8A8, bf, false, true},
      {"fp8 odd", 3, 131, 257, bf, WKind::Fp8W8A16, bf, true, true},
      {"fp8 odd", 3, 131, 257, bf, WKind::Fp8W8A8, f32, false, true},
      // The FP8 GEMV's regimes (decode, T <= 16).
      {"nano3 in_proj", 2, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 in_proj", 7, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 in_proj", 16, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 in_proj", 2, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A16, bf, false, true},
      {"nano3 in_proj", 7, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A16, bf, true, true},
      {"nano3 shared up", 1, Nano3::shared_width, Nano3::hidden, bf, WKind::Fp8W8A8, bf, false,
       true},
      {"nano3 shared down", 1, Nano3::hidden, Nano3::shared_width, bf, WKind::Fp8W8A8, bf, false,
       true},
      {"nano3 out_proj", 1, Nano3::hidden, Nano3::d_inner, bf, WKind::Fp8W8A8, bf, false, true},
      {"nano3 out_proj", 16, Nano3::hidden, Nano3::d_inner, bf, WKind::Fp8W8A8, bf, false, true},
      {"9b mlp up", 1, Nano9B::mlp, Nano9B::hidden, bf, WKind::Fp8W8A8, bf, false, true},
      {"9b mlp up", 1, Nano9B::mlp, Nano9B::hidden, bf, WKind::Fp8W8A16, bf, false, true},
      {"9b mlp down", 1, Nano9B::hidden, Nano9B::mlp, bf, WKind::Fp8W8A8, bf, false, true},
      {"9b mlp down", 1, Nano9B::hidden, Nano9B::mlp, bf, WKind::Fp8W8A16, bf, false, true},
      {"9b mlp down", 2, Nano9B::hidden, Nano9B::mlp, bf, WKind::Fp8W8A16, bf, false, true},
      // The streamed FP8 GEMV (weights of >= 48 MiB only) with its ring wrapping: K = 4624 is 10
      // slices of 512 bytes, K = 6544 is 13 (through 4 or 8 slots), and row counts that leave a
      // partial last tile.
      {"fp8 stream ring", 1, 11002, 4624, bf, WKind::Fp8W8A8, bf, false, true},
      {"fp8 stream ring", 3, 11002, 4624, bf, WKind::Fp8W8A16, f32, false, true},
      {"fp8 stream ring", 2, 8004, 6544, bf, WKind::Fp8W8A8, f32, false, true},
      {"fp8 aligned odd", 3, 131, 272, bf, WKind::Fp8W8A8, bf, true, true},
      {"fp8 aligned odd", 5, 131, 272, bf, WKind::Fp8W8A16, bf, true, true},
      {"fp8 aligned odd", 16, 37, 208, bf, WKind::Fp8W8A16, bf, false, true},
      {"fp8 aligned odd", 11, 1000, 1040, bf, WKind::Fp8W8A8, f32, false, true},
      {"fp8 all codes", 4, 64, 512, bf, WKind::Fp8W8A8, bf, false, true, Codes::All},
      // W8A8 on activations off the e4m3 grid, saturating: GEMV, small-M, cuBLASLt, streamed.
      {"nano3 in_proj", 1, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8OffGrid, bf, false,
       true},
      {"nano3 in_proj", 17, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A8OffGrid, bf, false,
       true},
      {"nano3 out_proj", 16, Nano3::hidden, Nano3::d_inner, bf, WKind::Fp8W8A8OffGrid, bf, false,
       true},
      {"9b mlp down", 8, Nano9B::hidden, Nano9B::mlp, bf, WKind::Fp8W8A8OffGrid, bf, false, true},
      {"fp8 stream ring", 1, 11002, 4624, bf, WKind::Fp8W8A8OffGrid, bf, false, true},
      {"fp8 aligned odd", 11, 1000, 1040, bf, WKind::Fp8W8A8OffGrid, f32, false, true},
      {"fp8 all codes", 4, 64, 512, bf, WKind::Fp8W8A8OffGrid, bf, false, true, Codes::All},
      // Decode steps of 2..8 tokens on cuBLASLt's FP8 GEMM (the FP8 GEMV takes T = 1 by
      // default), x quantized 8 values per thread (K % 8 == 0, aligned rows).
      {"nano3 out_proj", 2, Nano3::hidden, Nano3::d_inner, bf, WKind::Fp8W8A8OffGrid, bf, false,
       true},
      {"fp8 aligned odd", 5, 1000, 1040, bf, WKind::Fp8W8A8OffGrid, f32, false, true},
      {"fp8 all codes", 4, 64, 512, bf, WKind::Fp8W8A16, bf, false, true, Codes::All},
      {"fp8 small codes", 3, 64, 512, bf, WKind::Fp8W8A8, bf, false, true, Codes::Small},
      {"fp8 small codes", 3, 64, 512, bf, WKind::Fp8W8A16, bf, false, true, Codes::Small},
      // Refusals the table documents: W8A16 beyond the small-M kernel and beyond the FP8 GEMV's
      // staged x, FP8 GEMM with K % 16 != 0.
      {"fp8 W8A16 prefill", 17, 256, 512, bf, WKind::Fp8W8A16, bf, false, false},
      {"nano3 in_proj", 16, Nano3::in_proj, Nano3::hidden, bf, WKind::Fp8W8A16, bf, false, false},
      {"fp8 W8A8 odd K prefill", 17, 131, 257, bf, WKind::Fp8W8A8, bf, false, false},
  };
  std::vector<OpCase> out;
  for (const S& s : shapes)
    out.push_back({"linear",
                   fmt::format("{} T={} N={} K={} x {} {} -> {}{}{}", s.name, s.T, s.N, s.K,
                               dt(s.act), kind_name(s.kind), dt(s.out), s.x_view ? " x-view" : "",
                               s.codes == Codes::All     ? " all codes"
                               : s.codes == Codes::Small ? " small codes"
                                                         : ""),
                   s.supported, [s](Rng& rng) { return run_linear(s, rng); }});
  return out;
}

}  // namespace

STRATA_OP_CASES(linear_cases);

}  // namespace strata::opstest
