// The op harness entry point: every case of the table (cases_*.cpp) on the GPU, the summary
// printed last. Filter with STRATA_OPS_FILTER=op[,op...] (an op name, or any text of
// "op label"); vary the inputs with STRATA_OPS_SEED. Without a GPU the harness skips loudly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "../common/require_gpu.h"
#include "harness.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::opstest {
namespace {

// Harness cases per op at the last count (see TableCoversEveryOp); sample's belong to the
// sampler's own file and are only required to exist.
constexpr int kCasesEmbedding = 6, kCasesRmsNorm = 14, kCasesLinear = 67, kCasesConvPrefill = 38,
              kCasesConvUpdate = 24, kCasesSsmScan = 52, kCasesSsmUpdate = 22,
              kCasesGatedRmsNorm = 12, kCasesKvWrite = 8, kCasesAttention = 94, kCasesRelu2 = 9,
              kCasesAdd = 8, kCasesMoeRoute = 6, kCasesMoeExperts = 16, kCasesCast = 12;
// Checks of one kernel's arithmetic against an emulation of it (cases_ssd_mma_exact.cpp,
// cases_moe_w8a8.cpp).
constexpr int kCasesSsmScanMmaExact = 30, kCasesMoeExpertsW8A8 = 6;

std::vector<std::string> filters() {
  std::vector<std::string> out;
  if (const char* f = std::getenv("STRATA_OPS_FILTER")) {
    std::stringstream ss(f);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool selected(const OpCase& c, const std::vector<std::string>& fs) {
  if (fs.empty()) return true;
  const std::string full = c.op + " " + c.label;
  for (const auto& f : fs)
    if (c.op == f || full.find(f) != std::string::npos) return true;
  return false;
}

uint64_t case_seed(uint64_t base, const OpCase& c) {
  uint64_t h = base ^ 0xcbf29ce484222325ull;  // FNV-1a over "op label"
  for (char ch : c.op + " " + c.label)
    h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;
  return h;
}

// A fault that poisons the CUDA context makes every later result meaningless.
bool sticky(const std::string& detail) {
  for (const char* e :
       {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError", "cudaErrorAssert"})
    if (detail.find(e) != std::string::npos) return true;
  return false;
}

// Every op of ops.h has cases in the table, at least as many as when this count was taken
// (2026-12-02): a case list that shrinks (a file dropped from the build, a loop cut short) fails
// here, on every machine (no GPU needed). Raise a count when adding cases.
TEST(OpHarness, TableCoversEveryOp) {
  std::map<std::string, int> count;
  for (const auto& c : cases())
    ++count[c.op];
  const std::map<std::string, int> at_least = {{"embedding", kCasesEmbedding},
                                               {"rms_norm", kCasesRmsNorm},
                                               {"linear", kCasesLinear},
                                               {"conv1d_prefill", kCasesConvPrefill},
                                               {"conv1d_update", kCasesConvUpdate},
                                               {"ssm_scan", kCasesSsmScan},
                                               {"ssm_scan_mma_exact", kCasesSsmScanMmaExact},
                                               {"ssm_update", kCasesSsmUpdate},
                                               {"gated_rms_norm", kCasesGatedRmsNorm},
                                               {"kv_cache_write", kCasesKvWrite},
                                               {"attention", kCasesAttention},
                                               {"relu2", kCasesRelu2},
                                               {"add", kCasesAdd},
                                               {"moe_route", kCasesMoeRoute},
                                               {"moe_experts", kCasesMoeExperts},
                                               {"moe_experts_w8a8", kCasesMoeExpertsW8A8},
                                               {"cast", kCasesCast},
                                               {"sample", 1},
                                               {"token_mask", 4}};
  int total = 0;
  for (const auto& [op, n] : at_least) {
    EXPECT_GE(count[op], n) << "harness cases for op " << op;
    total += count[op];
  }
  std::printf("op harness table: %d cases over %zu ops\n", total, at_least.size());
  for (const auto& [op, n] : count)
    std::printf("  %s: %d\n", op.c_str(), n);
  EXPECT_EQ(count.size(), at_least.size()) << "an op without a count here";
}

TEST(OpHarness, EveryCudaKernelMatchesHost) {
  std::string why;
  if (!cuda::device_available(&why)) {
    STRATA_GPU_SKIP("the op harness needs a CUDA GPU and this machine has none (" + why +
                    "). Device kernels were NOT checked here.");
  }
  cuda::init_backend(0);
  const auto fs = filters();
  uint64_t base = 0x5eed;
  if (const char* s = std::getenv("STRATA_OPS_SEED")) base = std::strtoull(s, nullptr, 0);
  std::printf("op harness on %s, seed %llu%s\n", cuda::device_description().c_str(),
              static_cast<unsigned long long>(base), fs.empty() ? "" : " (filtered)");

  int64_t n_sel = 0, passed = 0, failed = 0, unsupported = 0, unexpected = 0, elements = 0;
  std::vector<std::string> failures;
  for (const OpCase& c : cases()) {
    if (!selected(c, fs)) continue;
    ++n_sel;
    Rng rng(case_seed(base, c));
    const auto t0 = std::chrono::steady_clock::now();
    Outcome o;
    try {
      o = c.run(rng);
    } catch (const std::exception& e) {
      o.status = Outcome::Failed;
      o.detail = std::string("the case threw: ") + e.what();
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string name = c.op + " | " + c.label;
    elements += o.compared;
    if (o.status == Outcome::Unsupported) {
      ++unsupported;
      if (c.expect_supported) {
        ++unexpected;
        failures.push_back(name + ": unsupported but the table expects a kernel:" + o.detail);
      }
      std::printf("[unsupported] %s: unsupported:%s\n", name.c_str(), o.detail.c_str());
    } else if (o.status == Outcome::Failed) {
      ++failed;
      failures.push_back(name);
      std::printf("[FAILED] %s (%s)\n%s\n", name.c_str(), o.kernels.c_str(), o.detail.c_str());
    } else if (!c.expect_supported) {
      ++failed;
      failures.push_back(name + ": ran, but the table documents it as refused: update the table");
      std::printf("[FAILED] %s: ran (%s) though the table expects a refusal\n", name.c_str(),
                  o.kernels.c_str());
    } else {
      ++passed;
      std::printf("[pass] %s (%s) %lld elements, worst err/tol %.3f, %.2fs\n", name.c_str(),
                  o.kernels.c_str(), static_cast<long long>(o.compared), o.worst, sec);
    }
    std::fflush(stdout);
    if (o.status == Outcome::Failed && sticky(o.detail)) {
      std::printf("stopping: the CUDA context is poisoned by a fault; later cases cannot run\n");
      failures.push_back("(remaining cases not run after a sticky CUDA fault)");
      break;
    }
  }
  std::printf(
      "\nop harness summary: %lld cases selected, %lld passed, %lld unsupported (%lld unexpected), "
      "%lld failed, %lld elements compared\n",
      static_cast<long long>(n_sel), static_cast<long long>(passed),
      static_cast<long long>(unsupported), static_cast<long long>(unexpected),
      static_cast<long long>(failed), static_cast<long long>(elements));
  for (const auto& f : failures)
    std::printf("  failed: %s\n", f.c_str());
  EXPECT_GT(n_sel, 0) << "the filter selected no case";
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(unexpected, 0);
  int64_t expect_refused = 0;
  for (const OpCase& c : cases())
    if (selected(c, fs) && !c.expect_supported) ++expect_refused;
  EXPECT_EQ(passed, n_sel - expect_refused)
      << "every case the table expects a kernel for must pass";
  EXPECT_GT(elements, 0);
}

}  // namespace
}  // namespace strata::opstest
