#include "bench_kernels_gemm.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "bench_kernels_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/device_context.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/linear.h"
#include "ops/ops.h"

namespace strata::cli::bench_kernels {
namespace {

using namespace strata::ops;

struct SurveyShape {
  const char* what;
  int64_t N, K;
  bool fp8;       // W8A8 e4m3 weights and x; else bf16
  DType out;      // bf16, or f32 for the lm_head
  int64_t max_M;  // the largest M the model runs it at (the lm_head sees sampled rows only)
};

// The linears of Nemotron-3-Nano-30B-A3B (FP8 W8A8 where the ModelOpt layout quantizes; the
// Mamba layers feeding attention, the attention projections and the lm_head stay bf16) and of
// Nemotron-Nano-9B-v2 (bf16).
const std::vector<SurveyShape>& survey_shapes() {
  static const std::vector<SurveyShape> shapes = {
      {"nano3 in_proj", 10304, 2688, true, DType::BF16, 16384},
      {"nano3 out_proj", 2688, 4096, true, DType::BF16, 16384},
      {"nano3 shared up", 3712, 2688, true, DType::BF16, 16384},
      {"nano3 shared down", 2688, 3712, true, DType::BF16, 16384},
      {"nano3 in_proj", 10304, 2688, false, DType::BF16, 16384},
      {"nano3 q_proj", 4096, 2688, false, DType::BF16, 16384},
      {"nano3 kv_proj", 256, 2688, false, DType::BF16, 16384},
      {"nano3 o_proj", 2688, 4096, false, DType::BF16, 16384},
      {"nano3 lm_head", 131072, 2688, false, DType::F32, 512},
      {"9b in_proj", 22656, 4480, false, DType::BF16, 16384},
      {"9b out_proj", 4480, 10240, false, DType::BF16, 16384},
      {"9b mlp up", 15680, 4480, false, DType::BF16, 16384},
      {"9b mlp down", 4480, 15680, false, DType::BF16, 16384},
      {"9b q_proj", 5120, 4480, false, DType::BF16, 16384},
      {"9b kv_proj", 1024, 4480, false, DType::BF16, 16384},
      {"9b o_proj", 4480, 5120, false, DType::BF16, 16384},
      {"9b lm_head", 131072, 4480, false, DType::F32, 512},
  };
  return shapes;
}

// The kernel the model's dispatch takes: the first CUDA kernel whose supports() passes.
const Kernel<LinearArgs>& dispatched(const LinearArgs& a) {
  for (const auto& k : OpTable<LinearArgs>::kernels())
    if (k.device == Device::Cuda && k.supports(a, nullptr)) return k;
  fail("no CUDA kernel takes the survey's linear");
}

GemmSurveyRow survey_one(const SurveyShape& s, int64_t M) {
  // Enough input sets that one graph replay streams past the L2 (small shapes), at most 8.
  const double wbytes = static_cast<double>(s.N * s.K) * (s.fp8 ? 1.0 : 2.0);
  const int sets = std::min(8, sets_for(wbytes + static_cast<double>(M * s.K * 2)));
  std::vector<LinearArgs> args(static_cast<size_t>(sets));
  for (LinearArgs& a : args) {
    a.x = s.fp8 ? random_device(Shape{M, s.K}, DType::F8E4M3, 64.f)
                : random_device(Shape{M, s.K}, DType::BF16, 1.f);
    a.w.weight = random_device(Shape{s.N, s.K}, s.fp8 ? DType::F8E4M3 : DType::BF16,
                               1.f / std::sqrt(static_cast<float>(s.K)));
    if (s.fp8) {
      a.w.weight_scale = 0.01f;
      a.w.input_scale = 1.f / 64.f;
    }
    a.out = Tensor::empty(Shape{M, s.N}, s.out, Device::Cuda);
  }
  OpContext ctx;
  cuda::bind(ctx);
  const auto& k = dispatched(args[0]);
  GemmSurveyRow r;
  r.shape = fmt::format("{} {} M={} (N={}, K={})", s.what, s.fp8 ? "fp8" : "bf16", M, s.N, s.K);
  r.dispatched = k.name;
  r.flops = 2.0 * static_cast<double>(M) * static_cast<double>(s.N) * static_cast<double>(s.K);
  r.us_dispatched = time_launches(sets, [&](int i) { k.run(args[static_cast<size_t>(i)], ctx); });
  // The same product as cuda.cublaslt computes it (x already e4m3 for fp8: no quantize pass).
  const auto launch_of = [&](const LinearArgs& a) {
    cuda::LinearLaunch p;
    p.x = cuda::mat_of(a.x);
    p.w = a.w.weight.raw();
    p.wt = a.w.weight.dtype();
    p.n = s.N;
    p.k = s.K;
    p.scale = s.fp8 ? a.w.weight_scale * a.w.input_scale : 1.f;
    p.input_scale = s.fp8 ? a.w.input_scale : 0.f;
    p.out = cuda::mat_of(a.out);
    return p;
  };
  cuda::DeviceContext& dc = cuda::context_of(ctx);
  r.proposals = cuda::linear_cublaslt_survey_size(launch_of(args[0]), dc);
  r.us_best = std::numeric_limits<double>::infinity();
  for (int algo = 0; algo < r.proposals; ++algo) {
    double us = std::nan("");
    try {
      us = time_launches(sets, [&](int i) {
        cuda::linear_cublaslt_survey_run(launch_of(args[static_cast<size_t>(i)]), dc,
                                         cuda::stream_of(ctx), algo);
      });
    } catch (const std::exception& e) {  // a proposal that fails to run is reported, not timed
      std::printf("  %s: proposal %d failed: %s\n", r.shape.c_str(), algo, e.what());
    }
    if (algo == 0) r.us_first = us;
    if (us < r.us_best) {
      r.us_best = us;
      r.best_index = algo;
    }
  }
  return r;
}

void print_survey_row(const GemmSurveyRow& r) {
  std::printf(
      "gemm survey %-44s %-16s %9.2f us %7.1f TFLOP/s | first %9.2f | best %9.2f (#%d of %d) "
      "| best/dispatched %.3f\n",
      r.shape.c_str(), r.dispatched.c_str(), r.us_dispatched, r.flops / r.us_dispatched / 1e6,
      r.us_first, r.us_best, r.best_index, r.proposals, r.us_best / r.us_dispatched);
  std::fflush(stdout);
}

}  // namespace

std::vector<GemmSurveyRow> run_gemm_survey(const std::string& only) {
  std::vector<GemmSurveyRow> rows;
  if (only.empty()) return rows;  // minutes of GEMMs: only when asked for
  for (const SurveyShape& s : survey_shapes())
    for (int64_t M : {2, 3, 8, 17, 64, 255, 512, 2048, 4097, 16384}) {
      if (M > s.max_M) continue;
      const std::string label =
          fmt::format("gemm survey {} {} M={}", s.what, s.fp8 ? "fp8" : "bf16", M);
      if (label.find(only) == std::string::npos) continue;
      rows.push_back(survey_one(s, M));
      print_survey_row(rows.back());
    }
  return rows;
}

void write_gemm_survey(std::ostringstream& f, const std::vector<GemmSurveyRow>& rows) {
  if (rows.empty()) return;
  f << "\n| linear | dispatched | time (us) | TFLOP/s | heuristic's first (us) | best proposal "
       "(us) "
       "| best / dispatched |\n|---|---|---|---|---|---|---|\n";
  for (const GemmSurveyRow& r : rows)
    f << fmt::format("| {} | {} | {:.2f} | {:.1f} | {:.2f} | {:.2f} (#{} of {}) | {:.3f} |\n",
                     r.shape, r.dispatched, r.us_dispatched, r.flops / r.us_dispatched / 1e6,
                     r.us_first, r.us_best, r.best_index, r.proposals, r.us_best / r.us_dispatched);
}

}  // namespace strata::cli::bench_kernels
