// cuBLASLt GEMMs for the linear op. Row-major y[T, N] = x[T, K] W[N, K]^T is, in cuBLASLt's
// column-major terms, D (N x T, ld = out row stride) = op(A) B with A = W viewed K x N
// (ld K, transposed: the "TN" layout FP8 requires) and B = x viewed K x T (ld = x row stride).
// Plans (descriptors and the heuristic's algorithm) are cached per shape and dtype. The survey
// functions run the heuristic's other proposals too, for bench-kernels' check of its first choice.
#ifdef STRATA_HAVE_CUDA
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_context.h"
#include "ops/cuda/linear.h"

namespace strata::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kSurveyAlgorithms = 16;  // proposals linear_cublaslt_survey_* time

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    case DType::F8E4M3:
      return CUDA_R_8F_E4M3;
    default:
      fail("cuBLASLt: no CUDA data type for {}", dtype_name(t));
  }
}

// N, T, K, ldx, ldo, dtypes (x, W, out), pointer alignments (x, W, out)
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, uint32_t,
                           uint32_t, uint32_t>;

// The largest power of two (up to 256) dividing the address: the heuristic otherwise assumes
// 256-byte aligned operands, and row views into wider tensors often are not.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0)
    al >>= 1;
  return al;
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;  // the heuristic's proposals, best first; [0] runs
};

// cuBLASLt's state in one device context: the handle, the workspace (used by one stream at a
// time: the context's) and the plans.
struct Lt {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;       // for the context's step stream
  void* side_workspace = nullptr;  // for its side stream (made on first use)
  std::map<PlanKey, Plan> plans;
  std::map<PlanKey, Plan> survey_plans;  // all proposals (linear_cublaslt_survey)
  ~Lt() {                                // no checks: destructors must not throw
    for (auto* m : {&plans, &survey_plans})
      for (auto& [key, pl] : *m) {
        cublasLtMatrixLayoutDestroy(pl.a);
        cublasLtMatrixLayoutDestroy(pl.b);
        cublasLtMatrixLayoutDestroy(pl.d);
        cublasLtMatmulDescDestroy(pl.op);
      }
    if (workspace) cudaFree(workspace);
    if (side_workspace) cudaFree(side_workspace);
    if (handle) cublasLtDestroy(handle);
  }
};
const char kLtKey = 0;

// `want`: how many of the heuristic's proposals to keep (1 for the GEMMs the model runs).
Plan make_plan(cublasLtHandle_t h, const LinearLaunch& p, uint32_t align_x, uint32_t align_w,
               uint32_t align_o, int want) {
  Plan pl;
  const cudaDataType_t at = cuda_type(p.wt), bt = cuda_type(p.x.dt), dt = cuda_type(p.out.dt);
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&pl.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const uint64_t N = static_cast<uint64_t>(p.n), T = static_cast<uint64_t>(p.x.rows),
                 K = static_cast<uint64_t>(p.k);
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.a, at, K, N, static_cast<int64_t>(K)));
  STRATA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&pl.b, bt, K, T, p.x.rows > 1 ? p.x.ld : static_cast<int64_t>(K)));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &pl.d, dt, N, T, p.out.rows > 1 ? p.out.ld : static_cast<int64_t>(N)));
  cublasLtMatmulPreference_t pref;
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes, sizeof(kWorkspaceBytes)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w, sizeof(align_w)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x, sizeof(align_x)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_o, sizeof(align_o)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_o, sizeof(align_o)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(want));
  int found = 0;
  STRATA_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, pl.op, pl.a, pl.b, pl.d, pl.d, pref, want,
                                                     results.data(), &found));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (found == 0)
    fail("cuBLASLt has no algorithm for linear x {}[{}, {}] (ld {}) W {}[{}, {}] -> {}",
         dtype_name(p.x.dt), T, K, p.x.ld, dtype_name(p.wt), N, K, dtype_name(p.out.dt));
  for (int i = 0; i < found; ++i)
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
      pl.algos.push_back(results[static_cast<size_t>(i)].algo);
  if (pl.algos.empty())
    fail("cuBLASLt proposed no usable algorithm for linear x {}[{}, {}] W {}[{}, {}] -> {}",
         dtype_name(p.x.dt), T, K, dtype_name(p.wt), N, K, dtype_name(p.out.dt));
  return pl;
}

// The plan for `p` from `l`'s cache (`survey`: the one keeping every proposal), made on first use.
const Plan& plan_for(Lt& l, const LinearLaunch& p, DeviceContext& dc, void* stream, bool survey) {
  std::lock_guard<std::mutex> lock(l.mu);
  if (!l.handle) {
    STRATA_CUBLAS_CHECK(cublasLtCreate(&l.handle));
    STRATA_CUDA_CHECK(cudaMalloc(&l.workspace, kWorkspaceBytes));
  }
  if (stream != dc.stream() && !l.side_workspace)
    STRATA_CUDA_CHECK(cudaMalloc(&l.side_workspace, kWorkspaceBytes));
  const uint32_t ax = alignment_of(p.x.p), aw = alignment_of(p.w), ao = alignment_of(p.out.p);
  const PlanKey key{p.n,
                    p.x.rows,
                    p.k,
                    p.x.ld,
                    p.out.ld,
                    static_cast<int>(p.x.dt),
                    static_cast<int>(p.wt),
                    static_cast<int>(p.out.dt),
                    ax,
                    aw,
                    ao};
  auto& plans = survey ? l.survey_plans : l.plans;
  auto it = plans.find(key);
  if (it == plans.end())
    it = plans.emplace(key, make_plan(l.handle, p, ax, aw, ao, survey ? kSurveyAlgorithms : 1))
             .first;
  return it->second;
}

void run_plan(Lt& l, const Plan& plan, size_t algo, const LinearLaunch& p, DeviceContext& dc,
              void* stream) {
  const float alpha = p.scale, beta = 0.f;
  STRATA_CUBLAS_CHECK(cublasLtMatmul(l.handle, plan.op, &alpha, p.w, plan.a, p.x.p, plan.b, &beta,
                                     p.out.p, plan.d, p.out.p, plan.d, &plan.algos[algo],
                                     stream == dc.stream() ? l.workspace : l.side_workspace,
                                     kWorkspaceBytes, static_cast<cudaStream_t>(stream)));
}

Lt& lt_of(DeviceContext& dc) {
  return dc.local<Lt>(&kLtKey, [] { return std::make_shared<Lt>(); });
}

}  // namespace

void linear_cublaslt(const LinearLaunch& p, DeviceContext& dc, void* stream) {
  if (p.x.rows == 0 || p.n == 0) return;
  Lt& l = lt_of(dc);
  run_plan(l, plan_for(l, p, dc, stream, false), 0, p, dc, stream);
}

int linear_cublaslt_survey_size(const LinearLaunch& p, DeviceContext& dc) {
  if (p.x.rows == 0 || p.n == 0) return 0;
  Lt& l = lt_of(dc);
  return static_cast<int>(plan_for(l, p, dc, dc.stream(), true).algos.size());
}

void linear_cublaslt_survey_run(const LinearLaunch& p, DeviceContext& dc, void* stream, int algo) {
  Lt& l = lt_of(dc);
  const Plan& plan = plan_for(l, p, dc, stream, true);
  if (algo < 0 || static_cast<size_t>(algo) >= plan.algos.size())
    fail("cuBLASLt survey: algorithm {} of {}", algo, plan.algos.size());
  run_plan(l, plan, static_cast<size_t>(algo), p, dc, stream);
}

}  // namespace strata::cuda
#else  // built without CUDA: the survey (bench-kernels) says why it cannot run

#include "ops/cuda/linear.h"

namespace strata::cuda {

[[noreturn]] void no_cuda();  // cuda_backend.cpp

int linear_cublaslt_survey_size(const LinearLaunch&, DeviceContext&) {
  no_cuda();
}
void linear_cublaslt_survey_run(const LinearLaunch&, DeviceContext&, void*, int) {
  no_cuda();
}

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
