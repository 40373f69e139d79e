// Cases: W8A8 inputs quantized by their producers (ops.h QuantizedOut). rms_norm, gated_rms_norm
// and relu2 with out_q, both with their act output and without it (label "out_q" / "out_q
// only"), and linear taking that e4m3 x (label "x e4m3"). Every output element is compared
// against the host op. Where the device writes both outputs, its e4m3 copy must also equal, byte
// for byte, what the linear's own quantize pass makes of its act output: e4m3_sat(out / scale)
// (the fusion changes no value). The scale saturates the largest values (|out| > 2.5 * ~1).
#include <cmath>

#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

// The input scale of the cases: about 1% of N(0, 1) values saturate at +-448.
constexpr float kInScale = 2.5f / 448.f;

enum class QMode { Both, QOnly };

std::string mode_name(QMode m) {
  return m == QMode::Both ? "out_q" : "out_q only";
}

// out_q of a [T, N] output: contiguous, or (view) a column range of wider rows whose stride is
// not a multiple of 8 (the kernels' strided forms).
Tensor make_out_q(int64_t T, int64_t N, bool view) {
  if (!view) return Tensor::empty(Shape{T, N}, DType::F8E4M3);
  return Tensor::empty(Shape{T, N + 5}, DType::F8E4M3).slice(1, 1, N);
}

// The output check of a case with both outputs: outputs are visited as (..., out, out_q). At
// out's index the device tensor is kept (and compared by the tolerance as usual); at out_q's the
// device bytes must equal e4m3_sat(device out / scale) exactly, and lie within one e4m3 step of
// the host's (the host's act output may differ by an act ulp).
OutputCheck exact_copy_check(int out_index, float scale) {
  auto kept = std::make_shared<Tensor>();
  return [out_index, scale, kept](int index, const Tensor& host, const Tensor& dev) -> std::string {
    if (index == out_index) {
      *kept = dev;
      return "skip";
    }
    if (index != out_index + 1 || !kept->defined()) return "skip";
    const int64_t rows = host.dim(0), cols = host.dim(1);
    int64_t bad = 0, far = 0;
    std::string first;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float o =
            load_as_f32(kept->raw(), kept->dtype(), static_cast<size_t>(r * kept->stride(0) + c));
        const uint8_t want = fp8e4m3_from_f32_sat(o / scale);
        const auto at = static_cast<size_t>(r * dev.stride(0) + c);
        const uint8_t got = static_cast<const uint8_t*>(dev.raw())[at];
        const uint8_t ref =
            static_cast<const uint8_t*>(host.raw())[static_cast<size_t>(r * host.stride(0) + c)];
        if (got != want && ++bad <= 3)
          first += fmt::format(" [{}, {}]: device 0x{:02x}, its out quantizes to 0x{:02x};", r, c,
                               got, want);
        // Neighbouring codes of one sign differ by 1 (the e4m3 codes are monotonic in |v|).
        if (std::abs(static_cast<int>(got) - static_cast<int>(ref)) > 1) ++far;
      }
    if (bad > 0)
      return fmt::format("{} e4m3 values are not their act value's quantization:{}", bad, first);
    if (far > 0) return fmt::format("{} e4m3 values more than one step from the host's", far);
    return "";
  };
}

std::vector<OpCase> rms_norm_q_cases() {
  struct S {
    const char* name;
    int64_t T, H;
    bool residual, x2, x_view, q_view;
  };
  const S shapes[] = {{"nano3", 1, Nano3::hidden, true, false, false, false},
                      {"nano3", 2, Nano3::hidden, true, true, false, false},
                      {"nano3", 3, Nano3::hidden, true, false, false, false},
                      {"nano3", 17, Nano3::hidden, true, true, false, false},
                      {"nano3", 255, Nano3::hidden, true, false, false, false},
                      {"nano3 prefill", 512, Nano3::hidden, true, true, false, false},
                      {"nano3 first layer", 3, Nano3::hidden, false, false, false, false},
                      {"9b", 3, Nano9B::hidden, true, false, false, false},
                      {"odd", 130, 131, true, true, true, true},
                      {"odd q-view", 17, Nano3::hidden, true, false, false, true}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      for (QMode m : {QMode::Both, QMode::QOnly})
        out.push_back({"rms_norm",
                       fmt::format("{} {} T={} H={} {}{}{}{}", mode_name(m), s.name, s.T, s.H,
                                   dt(act), s.residual ? " +residual" : "", s.x2 ? " +x2" : "",
                                   s.q_view ? " q-view" : ""),
                       true, [s, act, m](Rng& rng) {
                         RmsNormArgs a;
                         a.x = s.x_view ? wide_rows(rng, s.T, s.H, 7, 3, act, 1.f)
                                        : normal_tensor(rng, Shape{s.T, s.H}, act, 1.f);
                         if (s.residual) a.residual = normal_tensor(rng, Shape{s.T, s.H}, act, 1.f);
                         if (s.x2) a.x2 = normal_tensor(rng, Shape{s.T, s.H}, act, 1.f);
                         a.weight = uniform_tensor(rng, Shape{s.H}, act, 0.5f, 1.5f);
                         a.eps = 1e-5f;
                         if (m == QMode::Both) a.out = Tensor::empty(Shape{s.T, s.H}, act);
                         a.out_q = make_out_q(s.T, s.H, s.q_view);
                         a.out_q_scale = kInScale;
                         Tolerance tol;  // as rms_norm's cases; e4m3 outputs: within an e4m3 step
                         tol.reduction = s.H;
                         tol.roundings = (s.residual ? 2 : 1) + (s.x2 ? 1 : 0);
                         tol.math = 1;
                         // Visit order: x, [x2], [residual], weight, [out], out_q.
                         const int out_index = 2 + (s.x2 ? 1 : 0) + (s.residual ? 1 : 0);
                         return run_case(a, act, tol, {},
                                         m == QMode::Both ? exact_copy_check(out_index, kInScale)
                                                          : OutputCheck{});
                       }});
  return out;
}

std::vector<OpCase> gated_norm_q_cases() {
  struct S {
    const char* name;
    int64_t T, D, G;
    bool q_view;
  };
  // The block form below 64 rows, the warp form (cuda.warp) from 64 rows.
  const S shapes[] = {{"nano3", 1, Nano3::d_inner, Nano3::groups, false},
                      {"nano3", 2, Nano3::d_inner, Nano3::groups, false},
                      {"nano3", 3, Nano3::d_inner, Nano3::groups, false},
                      {"nano3", 17, Nano3::d_inner, Nano3::groups, false},
                      {"nano3", 255, Nano3::d_inner, Nano3::groups, false},
                      {"nano3 prefill", 512, Nano3::d_inner, Nano3::groups, false},
                      {"nano3 q-view", 65, Nano3::d_inner, Nano3::groups, true},
                      {"9b", 3, Nano9B::d_inner, Nano9B::groups, false},
                      {"odd", 130, 381, 3, true}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      for (QMode m : {QMode::Both, QMode::QOnly})
        out.push_back({"gated_rms_norm",
                       fmt::format("{} {} T={} D={} groups={} {}{}", mode_name(m), s.name, s.T, s.D,
                                   s.G, dt(act), s.q_view ? " q-view" : ""),
                       true, [s, act, m](Rng& rng) {
                         GatedRmsNormArgs a;
                         a.y = normal_tensor(rng, Shape{s.T, s.D}, act, 1.f);
                         a.z = wide_rows(rng, s.T, s.D, 64, 0, act, 1.5f);
                         a.weight = uniform_tensor(rng, Shape{s.D}, act, 0.5f, 1.5f);
                         a.groups = s.G;
                         a.eps = 1e-5f;
                         if (m == QMode::Both) a.out = Tensor::empty(Shape{s.T, s.D}, act);
                         a.out_q = make_out_q(s.T, s.D, s.q_view);
                         a.out_q_scale = kInScale;
                         Tolerance tol;  // as gated_rms_norm's cases
                         tol.reduction = s.D / s.G;
                         tol.roundings = 1;
                         tol.math = 2;
                         // Visit order: y, z, weight, [out], out_q.
                         return run_case(
                             a, act, tol, {},
                             m == QMode::Both ? exact_copy_check(3, kInScale) : OutputCheck{});
                       }});
  return out;
}

std::vector<OpCase> relu2_q_cases() {
  struct S {
    const char* name;
    int64_t T, N;
    bool x_view, q_view;
  };
  const S shapes[] = {{"nano3 shared", 1, Nano3::shared_width, false, false},
                      {"nano3 shared", 2, Nano3::shared_width, false, false},
                      {"nano3 shared", 3, Nano3::shared_width, false, false},
                      {"nano3 shared", 17, Nano3::shared_width, false, false},
                      {"nano3 shared", 255, Nano3::shared_width, false, false},
                      {"nano3 shared prefill", 512, Nano3::shared_width, false, false},
                      {"9b mlp", 1, Nano9B::mlp, false, false},
                      {"nano3 shared x-view", 17, Nano3::shared_width, true, false},
                      {"odd", 130, 131, true, true}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    for (DType act : acts())
      for (QMode m : {QMode::Both, QMode::QOnly})
        out.push_back({"relu2",
                       fmt::format("{} {} T={} N={} {}{}", mode_name(m), s.name, s.T, s.N, dt(act),
                                   s.q_view ? " q-view" : ""),
                       true, [s, act, m](Rng& rng) {
                         Relu2Args a;
                         // x ~ N(0, 1.2): relu² of the upper tail saturates at 2.5.
                         a.x = s.x_view ? wide_rows(rng, s.T, s.N, 9, 4, act, 1.2f)
                                        : normal_tensor(rng, Shape{s.T, s.N}, act, 1.2f);
                         if (m == QMode::Both) a.out = Tensor::empty(Shape{s.T, s.N}, act);
                         a.out_q = make_out_q(s.T, s.N, s.q_view);
                         a.out_q_scale = kInScale;
                         // Visit order: x, [out], out_q.
                         return run_case(
                             a, act, Tolerance{}, {},
                             m == QMode::Both ? exact_copy_check(1, kInScale) : OutputCheck{});
                       }});
  return out;
}

// linear with x e4m3 (quantized by its producer with the weight's input_scale): the host
// computes the same W8A8 sums in f32. Every CUDA kernel that takes the shape runs: the FP8 GEMV
// (T = 1; the streamed one for weights >= 48 MiB), cuBLASLt's FP8 GEMM (no quantize pass), and
// the small-M kernel where cuBLASLt refuses.
std::vector<OpCase> linear_e4m3_x_cases() {
  struct S {
    const char* name;
    int64_t T, N, K;
    DType out;
    bool x_view, supported;
  };
  const DType bf = DType::BF16, f32 = DType::F32;
  const S shapes[] = {
      {"nano3 in_proj", 1, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 in_proj", 2, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 in_proj", 3, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 in_proj", 8, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 in_proj", 17, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 in_proj", 255, Nano3::in_proj, Nano3::hidden, bf, false, true},
      {"nano3 out_proj", 1, Nano3::hidden, Nano3::d_inner, bf, false, true},
      {"nano3 out_proj", 8, Nano3::hidden, Nano3::d_inner, bf, false, true},
      {"nano3 out_proj", 512, Nano3::hidden, Nano3::d_inner, bf, false, true},
      {"nano3 shared up", 1, Nano3::shared_width, Nano3::hidden, bf, false, true},
      {"nano3 shared up", 64, Nano3::shared_width, Nano3::hidden, bf, false, true},
      {"nano3 shared down", 1, Nano3::hidden, Nano3::shared_width, bf, true, true},
      {"nano3 shared down", 8, Nano3::hidden, Nano3::shared_width, bf, false, true},
      {"nano3 shared down", 512, Nano3::hidden, Nano3::shared_width, bf, false, true},
      {"fp8 stream ring", 1, 11002, 4624, bf, false, true},
      {"fp8 stream ring", 2, 8004, 6544, f32, false, true},
      // cuBLASLt refuses N = 131 (output stride): the small-M kernel, vectorized and not.
      {"fp8 aligned odd", 3, 131, 272, bf, true, true},
      {"fp8 aligned odd", 5, 131, 272, f32, false, true},
      {"fp8 odd K", 3, 131, 257, bf, false, true},
      // Refused: odd K above the small-M kernel's rows (cuBLASLt needs K % 16 == 0).
      {"fp8 odd K prefill", 17, 131, 257, bf, false, false},
  };
  std::vector<OpCase> out;
  for (const S& s : shapes)
    out.push_back({"linear",
                   fmt::format("x e4m3 {} T={} N={} K={} -> {}{}", s.name, s.T, s.N, s.K, dt(s.out),
                               s.x_view ? " x-view" : ""),
                   s.supported, [s](Rng& rng) {
                     LinearArgs a;
                     // x = e4m3_sat(N(0, 1) / scale): what a producer writes (saturating ~1%).
                     const int64_t pad = s.x_view ? 16 : 0;
                     Tensor wide = Tensor::empty(Shape{s.T, s.K + pad}, DType::F8E4M3);
                     auto* q = static_cast<uint8_t*>(wide.raw());
                     for (int64_t i = 0; i < wide.numel(); ++i)
                       q[i] = fp8e4m3_from_f32_sat(rng.normal() / kInScale);
                     a.x = wide.slice(1, pad, s.K);
                     a.w.weight =
                         fp8_weight(rng, Shape{s.N, s.K}, 1.f / std::sqrt(static_cast<float>(s.K)),
                                    &a.w.weight_scale);
                     a.w.input_scale = kInScale;
                     a.out = Tensor::empty(Shape{s.T, s.N}, s.out);
                     Tolerance tol;  // one f32 sum of K products of the same e4m3 values
                     tol.reduction = s.K;
                     tol.fp8_mma = true;  // the cuBLASLt FP8 GEMM accumulates below f32
                     return run_case(a, DType::BF16, tol);
                   }});
  return out;
}

std::vector<OpCase> all() {
  std::vector<OpCase> out;
  for (auto f : {rms_norm_q_cases, gated_norm_q_cases, relu2_q_cases, linear_e4m3_x_cases})
    for (auto& c : f())
      out.push_back(std::move(c));
  return out;
}

}  // namespace

STRATA_OP_CASES(all);

}  // namespace strata::opstest
