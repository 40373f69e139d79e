#include "bench_kernels_scan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <tuple>

#include "bench_kernels_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/ssm.h"
#include "ops/ops.h"

namespace strata::cli::bench_kernels {
namespace {

using namespace strata::ops;

// The models whose scan shapes the rows take: (name, Mamba heads, head_dim); G = 8, N = 128.
constexpr std::array kScanModels = {std::tuple{"nano3", 64, 64}, std::tuple{"9b", 128, 80}};

std::string scan_shape(const char* what, int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t seqs,
                       int64_t len) {
  return fmt::format("{} {}x{} tokens heads {}x{} G={} N={}", what, seqs, len, Hm, P, G, N);
}

// The minimum-bytes ceiling of a scan call: x, B, C, dt read once, y written once, the initial
// and final states (no intermediate state traffic at all).
double scan_io_bytes(int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t seqs, int64_t len) {
  const double T = static_cast<double>(seqs * len);
  const double state = static_cast<double>(Hm * P * N) * 4.0;
  return T * static_cast<double>(2 * Hm * P + 2 * G * N + Hm) * 2.0 +
         static_cast<double>(seqs) * 2.0 * state;
}

// Bytes a chunked scan of this design must move: x, B, C, dt read once, y written once, the
// initial and final states, and one f32 round trip of the chunk states (written by the
// chunk-state kernel, read by the state passing). The per-call time is compared with both at the
// H200's read ceiling.
double scan_min_bytes(int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t Q, int64_t seqs,
                      int64_t len) {
  const double T = static_cast<double>(seqs * len);
  const double chunks = static_cast<double>(seqs * ((len + Q - 1) / Q));
  const double state = static_cast<double>(Hm * P * N) * 4.0;
  return T * static_cast<double>(2 * Hm * P + 2 * G * N + Hm) * 2.0 +
         static_cast<double>(seqs) * 2.0 * state + chunks * 2.0 * state;
}

// Per-kernel split of one scan call: eager launches behind a spinning kernel (so they run back
// to back, as in the graph), a CUDA event after each kernel the launcher enqueues
// (cuda::scan_stage_marker); median over `reps` calls per kernel.
std::vector<ScanStage> split_scan_call(const std::function<void()>& call, int reps) {
  cuda::StreamTimeline timeline;
  std::vector<std::string> names;
  const cuda::ScanStageMarker marker = [&](const char* kernel) {
    timeline.mark();
    names.emplace_back(kernel);
  };
  std::vector<std::vector<double>> us;  // [kernel][rep]
  for (int rep = 0; rep < reps; ++rep) {
    timeline.clear();
    names.clear();
    cuda::spin(300.0);
    timeline.mark();
    cuda::scan_stage_marker = &marker;
    try {
      call();
    } catch (...) {
      cuda::scan_stage_marker = nullptr;
      throw;
    }
    cuda::scan_stage_marker = nullptr;
    const std::vector<double> ms = timeline.intervals_ms();
    STRATA_CHECK_EQ(ms.size(), names.size());
    if (us.empty()) us.resize(ms.size());
    STRATA_CHECK_EQ(ms.size(), us.size());
    for (size_t i = 0; i < ms.size(); ++i)
      us[i].push_back(ms[i] * 1000.0);
  }
  std::vector<ScanStage> stages;
  for (size_t i = 0; i < us.size(); ++i) {
    std::sort(us[i].begin(), us[i].end());
    stages.push_back(ScanStage{names[i], us[i][us[i].size() / 2]});
  }
  return stages;
}

double scan_flops(int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t Q, int64_t seqs,
                  int64_t len) {
  double pairs = 0;  // sum over a sequence's chunks of Lc (Lc + 1) / 2
  for (int64_t c0 = 0; c0 < len; c0 += Q) {
    const double lc = static_cast<double>(std::min(Q, len - c0));
    pairs += lc * (lc + 1) / 2;
  }
  pairs *= static_cast<double>(seqs);
  const double T = static_cast<double>(seqs * len);
  return 2.0 * (static_cast<double>(G * N) * pairs + 2.0 * static_cast<double>(Hm * P * N) * T +
                static_cast<double>(Hm * P) * pairs);
}

ScanRow bench_ssm_scan(const char* kernel, const char* what, int64_t Hm, int64_t P, int64_t G,
                       int64_t N, int64_t seqs, int64_t len) {
  const int64_t Q = 128, T = seqs * len, width = Hm * P + 2 * G * N + Hm;
  SsmScanArgs a;
  Tensor row = random_device(Shape{T, width}, DType::BF16, 1.f);  // [T, x | B | C | dt]
  a.x = row.slice(1, 0, Hm * P);
  a.B = row.slice(1, Hm * P, G * N);
  a.C = row.slice(1, Hm * P + G * N, G * N);
  a.dt_raw = row.slice(1, Hm * P + 2 * G * N, Hm);
  Tensor A = Tensor::empty(Shape{Hm}, DType::F32, Device::Host);
  Tensor bias = Tensor::empty(Shape{Hm}, DType::F32, Device::Host);
  for (int64_t h = 0; h < Hm; ++h) {
    const float u = 0.5f + 0.5f * next_uniform(), v = 0.5f + 0.5f * next_uniform();
    A.data<float>()[h] = -std::exp(2.77f * u);
    const float dt0 = std::exp(std::log(1e-3f) + v * (std::log(1e-1f) - std::log(1e-3f)));
    bias.data<float>()[h] = std::log(std::expm1(dt0));
  }
  a.A = A.to(Device::Cuda);
  a.dt_bias = bias.to(Device::Cuda);
  a.D = random_device(Shape{Hm}, DType::F32, 1.f);
  a.ssm_states = random_device(Shape{seqs, Hm, P, N}, DType::F32, 0.5f);
  std::vector<int32_t> cu{0}, slots, init;
  for (int64_t b = 0; b < seqs; ++b) {
    cu.push_back(static_cast<int32_t>((b + 1) * len));
    slots.push_back(static_cast<int32_t>(b));
    init.push_back(1);
  }
  a.cu_seqlens = device_i32(cu);
  a.slots = device_i32(slots);
  a.has_initial = device_i32(init);
  a.heads = Hm;
  a.head_dim = P;
  a.groups = G;
  a.state_size = N;
  a.chunk_size = Q;
  a.out = Tensor::empty(Shape{T, Hm * P}, DType::BF16, Device::Cuda);
  const auto& k = kernel_named<SsmScanArgs>(kernel);
  OpContext ctx;
  cuda::bind(ctx);
  std::string why;
  if (!k.supports(a, &why)) fail("bench ssm_scan {}: {}", kernel, why);
  ScanRow r;
  r.kernel = fmt::format("ssm_scan {} (bf16)", kernel);
  r.shape = scan_shape(what, Hm, P, G, N, seqs, len);
  r.tokens = static_cast<double>(T);
  r.flops = scan_flops(Hm, P, G, N, Q, seqs, len);
  r.bytes = scan_min_bytes(Hm, P, G, N, Q, seqs, len);
  r.io_bytes = scan_io_bytes(Hm, P, G, N, seqs, len);
  r.us = time_launches(1, [&](int) { k.run(a, ctx); });
  r.stages = split_scan_call([&] { k.run(a, ctx); }, 20);
  return r;
}

// The io floor of a scan row: one device-to-device copy of half its io bytes (so as many bytes
// read and written in all), timed as the kernels are (a graph of one call, median of 20). What
// a call that only moved the scan's bytes would take on this GPU with the same launch and the
// same L2 (the 1x2048 rows' 46 MB of x, B, C, dt, y and states partly stay in the 50 MB L2
// between replays, for the scan kernels as for this copy).
ScanRow bench_io_floor(const char* what, int64_t Hm, int64_t P, int64_t G, int64_t N, int64_t seqs,
                       int64_t len) {
  ScanRow r;
  r.kernel = "ssm_scan io floor (d2d copy)";
  r.shape = scan_shape(what, Hm, P, G, N, seqs, len);
  r.tokens = static_cast<double>(seqs * len);
  r.io_bytes = r.bytes = scan_io_bytes(Hm, P, G, N, seqs, len);
  const int64_t half = static_cast<int64_t>(r.io_bytes / 2 / 4);  // f32 elements
  Tensor src = random_device(Shape{half}, DType::F32, 1.f);
  Tensor dst = Tensor::empty(Shape{half}, DType::F32, Device::Cuda);
  r.us = time_launches(1, [&](int) { dst.copy_from(src); });
  return r;
}

}  // namespace

std::vector<ScanRow> run_scan_rows(const std::string& only) {
  std::vector<ScanRow> rows;
  for (const auto& [what, Hm, P] : kScanModels)
    for (const auto& [seqs, len] : {std::pair{1, 512}, std::pair{1, 2048}, std::pair{1, 4096}}) {
      const std::string label = fmt::format("ssm_scan floor {} {}x{}", what, seqs, len);
      if (only.empty() || label.find(only) == std::string::npos) continue;  // asked for by name
      const ScanRow r = bench_io_floor(what, Hm, P, 8, 128, seqs, len);
      std::printf("%-34s %-40s %9.2f us: %5.1f%% of the %.0f MB ceiling (io only)\n",
                  r.kernel.c_str(), r.shape.c_str(), r.us,
                  100.0 * r.io_bytes / r.us / 1e3 / kCeilingGBs, r.io_bytes / 1e6);
      std::fflush(stdout);
      rows.push_back(r);
    }
  for (const char* kernel :
       {"cuda.ssd_wg", "cuda.ssd_seq", "cuda.ssd_fused", "cuda.ssd_chain", "cuda.ssd_mma", "cuda"})
    for (const auto& [what, Hm, P] : kScanModels)
      for (const auto& [seqs, len] :
           {std::pair{1, 512}, std::pair{1, 2048}, std::pair{1, 4096}, std::pair{8, 512},
            std::pair{16, 128}}) {  // 16x128: 1x2048's blocks with no chunk chained to another
        const std::string label = fmt::format("ssm_scan {} {} {}x{}", kernel, what, seqs, len);
        if (!only.empty() && label.find(only) == std::string::npos) continue;
        const ScanRow r = bench_ssm_scan(kernel, what, Hm, P, 8, 128, seqs, len);
        std::printf(
            "%-34s %-40s %9.2f us %10.0f tokens/s %7.1f TFLOP/s %6.1f%% of %.0f MB at "
            "4.57 TB/s; %5.1f%% of the %.0f MB ceiling (io only)\n",
            r.kernel.c_str(), r.shape.c_str(), r.us, r.tokens / r.us * 1e6, r.flops / r.us / 1e6,
            100.0 * r.bytes / r.us / 1e3 / kCeilingGBs, r.bytes / 1e6,
            100.0 * r.io_bytes / r.us / 1e3 / kCeilingGBs, r.io_bytes / 1e6);
        for (const ScanStage& st : r.stages)
          std::printf("  %-32s %-40s %9.2f us (eager, split)\n", st.kernel.c_str(), r.shape.c_str(),
                      st.us);
        std::fflush(stdout);
        rows.push_back(r);
      }
  return rows;
}

void write_scan_rows(std::ostringstream& f, const std::vector<ScanRow>& rows) {
  if (rows.empty()) return;
  f << "\n| kernel | shape | time (us) | tokens/s | GFLOP | TFLOP/s | min MB | of 4.57 TB/s "
       "| io MB | of the io ceiling |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ScanRow& r : rows) {
    f << fmt::format(
        "| {} | {} | {:.2f} | {:.0f} | {:.2f} | {:.1f} | {:.0f} | {:.1f}% | {:.0f} | {:.1f}% |\n",
        r.kernel, r.shape, r.us, r.tokens / r.us * 1e6, r.flops / 1e9, r.flops / r.us / 1e6,
        r.bytes / 1e6, 100.0 * r.bytes / r.us / 1e3 / kCeilingGBs, r.io_bytes / 1e6,
        100.0 * r.io_bytes / r.us / 1e3 / kCeilingGBs);
    for (const ScanStage& st : r.stages)
      f << fmt::format("| &nbsp;&nbsp;{} (eager split) | {} | {:.2f} | | | | | | | |\n", st.kernel,
                       r.shape, st.us);
  }
}

}  // namespace strata::cli::bench_kernels
