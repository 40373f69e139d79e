// Registrations of the linear op on the CUDA backend. The kernels live in this file so their
// order is fixed: ops::run takes the first that supports the arguments, which makes
//   - the FP8 GEMV the choice for e4m3 weights: W8A8 at T = 1 (STRATA_FP8_GEMV_MAX_ROWS), W8A16
//     at T <= 16, when its staged x fits (streamed through shared memory, cuda.fp8_stream, for
//     weights of >= 48 MiB, else from registers, cuda.fp8_gemv);
//   - the small-M kernel the choice for bf16 weights at T = 1 (STRATA_SMALL_M_MAX_ROWS), for f32
//     and W8A16 weights at T <= 8, and for W8A8 at T <= 8 where cuBLASLt's FP8 GEMM refuses;
//   - cuBLASLt the choice above (the harness tests all).
// Decode steps of 2..16 tokens run cuBLASLt's tensor-core GEMMs: at those M its time is that of
// M = 1 (the weights are read once), while the GEMV-style kernels' work grows with M.
// An e4m3 x (W8A8, quantized by its producer: ops.h QuantizedOut) takes the same kernels with
// the same limits, minus their quantization (no separate pass before cuBLASLt and the small-M
// kernel; the FP8 GEMVs stage a copy).
#ifdef STRATA_HAVE_CUDA
#include <cstdlib>

#include "ops/cuda/kernel_support.h"
#include "ops/cuda/linear.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::LinearArgs;

void check_common(ArgCheck& c, const LinearArgs& a) {
  const Tensor& w = a.w.weight;
  c.on_device(a.x, "x").on_device(w, "weight").on_device(a.out, "out").rows(a.x, -1, -1, "x");
  c.require(w.rank() == 2, fmt::format("weight {} must be [N, K]", w.str()));
  if (!c) return;
  c.contiguous(w, w.shape(), "weight")
      .rows(a.x, -1, w.dim(1), "x")
      .rows(a.out, a.x.dim(0), w.dim(0), "out");
  c.require(a.out.dtype() == DType::F32 || a.out.dtype() == DType::BF16,
            fmt::format("out {} must be f32 or bf16", a.out.str()));
  const DType xt = a.x.dtype(), wt = w.dtype();
  const bool combo = (xt == DType::BF16 && (wt == DType::BF16 || wt == DType::F8E4M3)) ||
                     (xt == DType::BF16 && wt == DType::F32 && a.out.dtype() == DType::F32) ||
                     (xt == DType::F32 && wt == DType::F32 && a.out.dtype() == DType::F32) ||
                     (xt == DType::F8E4M3 && wt == DType::F8E4M3);
  c.require(combo, fmt::format("x {} with weight {} -> out {} is not a supported combination",
                               dtype_name(xt), dtype_name(wt), dtype_name(a.out.dtype())));
  if (xt == DType::F8E4M3)
    c.require(a.w.input_scale > 0.f,
              "x f8e4m3 (quantized by its producer) needs the weight's input_scale > 0 (W8A8)");
  if (wt == DType::F8E4M3)
    c.require(a.w.input_scale >= 0.f && a.w.weight_scale > 0.f,
              fmt::format("fp8 scales: weight_scale {} must be > 0, input_scale {} >= 0",
                          a.w.weight_scale, a.w.input_scale));
}

bool is_w8a8(const LinearArgs& a) {
  return a.w.weight.dtype() == DType::F8E4M3 && a.w.input_scale > 0.f;
}

LinearLaunch launch_of(const LinearArgs& a) {
  LinearLaunch p;
  p.x = mat_of(a.x);
  p.w = a.w.weight.raw();
  p.wt = a.w.weight.dtype();
  p.n = a.w.weight.dim(0);
  p.k = a.w.weight.dim(1);
  p.scale = p.wt == DType::F8E4M3 ? a.w.weight_scale : 1.f;
  p.out = mat_of(a.out);
  return p;
}

// W8A8: the GEMM's e4m3 x. An x already e4m3 was quantized by its producer (rms_norm,
// gated_rms_norm or relu2 with out_q: no pass here); a bf16 x is quantized into `scratch`
// (kept alive by the caller until the GEMM is enqueued).
void quantize_input(const LinearArgs& a, LinearLaunch& p, Tensor& scratch, void* stream) {
  p.scale = a.w.input_scale * a.w.weight_scale;
  if (a.x.dtype() == DType::F8E4M3) return;
  const int64_t T = a.x.dim(0), K = a.x.dim(1);
  scratch = Tensor::empty(Shape{T, K}, DType::F8E4M3, Device::Cuda);
  launch_quantize_fp8(p.x, a.w.input_scale, scratch.raw(), stream);
  p.x = Mat{scratch.raw(), T, K, K, DType::F8E4M3};
}

// A row limit from the environment (1..max, read by the caller once), else `fallback`.
int64_t rows_from_env(const char* name, int64_t fallback, int64_t max) {
  const char* e = std::getenv(name);
  const long long n = e ? std::atoll(e) : 0;
  return n >= 1 && n <= max ? static_cast<int64_t>(n) : fallback;
}

// Rows up to which the small-M kernel takes bf16 weights (cuBLASLt above): 1 by default. Its
// weight stream is shared by the rows, but every 16-byte chunk (8 bf16) is applied to every row
// with f32 FMAs on the CUDA cores: M / 2 FMAs per weight byte (at T = 8, reading at 4.57 TB/s
// would need 18 T FMA/s, 55% of the H200's f32 peak, before the unpacking and the x loads), so
// its time grows with T, while cuBLASLt's bf16 GEMM runs on the tensor cores and costs the same
// at T = 1..16. Measured (docs/BENCHMARKS.md, branch rest3): 9B-v2 in_proj small-M 57.7 / 83.1 /
// 144.9 us at T = 1 / 2 / 8 against cuBLASLt's 52.5-55.7; the 9B-v2 decode step at B = 8 12.8 ->
// 5.9 ms. T = 1 stays here: within 83% of cuBLASLt on every model shape, faster on some (the
// Nano-3 lm_head 166 vs 174 us), and the batch-1 decode graphs were tuned on it.
// STRATA_SMALL_M_MAX_ROWS overrides it (1..kSmallMMaxRows; `strata bench --batch` and
// `bench-kernels --only "M sweep"` measure it). f32 weights (x f32, or a bf16 x with an f32
// router) keep kSmallMMaxRows: M / 4 FMAs per byte, and cuBLASLt's f32 GEMM has no tensor cores.
constexpr int64_t kSmallMDefaultRowsBf16 = 1;
int64_t small_m_max_rows_bf16() {
  static const int64_t v =
      rows_from_env("STRATA_SMALL_M_MAX_ROWS", kSmallMDefaultRowsBf16, kSmallMMaxRows);
  return v;
}

// Rows up to which the FP8 GEMVs take W8A8 (cuBLASLt's FP8 GEMM above, after its separate
// quantize pass): 1 by default. Each of their blocks quantizes all T x K activations, so their
// time grows with T: Nano-3 in_proj 13.3 / 14.4 / 22.7 us at T = 1 / 2 / 8 against cuBLASLt's
// 11.2-12.0 at T = 1..16; the Nano-3 decode step at B = 8 8.1 -> 6.4 ms (docs/BENCHMARKS.md,
// branch rest3). STRATA_FP8_GEMV_MAX_ROWS overrides it (1..kFp8GemvMaxRowsW8A8). W8A16 has no
// cuBLASLt path and keeps kFp8GemvMaxRows.
constexpr int64_t kFp8GemvDefaultRowsW8A8 = 1;
int64_t fp8_gemv_max_rows_w8a8() {
  static const int64_t v =
      rows_from_env("STRATA_FP8_GEMV_MAX_ROWS", kFp8GemvDefaultRowsW8A8, kFp8GemvMaxRowsW8A8);
  return v;
}

bool cublaslt_supports(const LinearArgs& a, std::string* why);

bool small_m_supports(const LinearArgs& a, std::string* why) {
  ArgCheck c(why);
  check_common(c, a);
  if (!c) return false;
  const int64_t T = a.x.dim(0);
  const int64_t limit =
      a.w.weight.dtype() == DType::BF16 ? small_m_max_rows_bf16() : kSmallMMaxRows;
  c.require(T <= limit, fmt::format("T = {} above the small-M limit {} for {} weights", T, limit,
                                    dtype_name(a.w.weight.dtype())));
  if (!c) return false;
  // W8A8 above the FP8 GEMV's rows: cuBLASLt's FP8 GEMM wherever it takes the shape.
  if (is_w8a8(a) && T > fp8_gemv_max_rows_w8a8())
    c.require(!cublaslt_supports(a, nullptr),
              fmt::format("W8A8 at T = {} runs on cuBLASLt's FP8 GEMM (the small-M kernel only "
                          "takes the shapes it refuses)",
                          T));
  return c;
}
void small_m_run(const LinearArgs& a, OpContext& ctx) {
  LinearLaunch p = launch_of(a);
  Tensor xq;
  if (is_w8a8(a)) quantize_input(a, p, xq, stream_of(ctx));
  launch_linear_small_m(p, stream_of(ctx));
}

bool fp8_gemv_supports(const LinearArgs& a, std::string* why) {
  ArgCheck c(why);
  check_common(c, a);
  if (!c) return false;
  const Tensor& w = a.w.weight;
  const int64_t T = a.x.dim(0), K = w.dim(1);
  c.require(w.dtype() == DType::F8E4M3,
            fmt::format("weight {} is not e4m3 (the FP8 GEMV's weights)", w.str()));
  const int64_t max_rows = is_w8a8(a) ? fp8_gemv_max_rows_w8a8() : kFp8GemvMaxRows;
  c.require(T <= max_rows, fmt::format("T = {} above the FP8 GEMV's limit {} for {}", T, max_rows,
                                       is_w8a8(a) ? "W8A8" : "W8A16"));
  if (!c) return false;
  c.require(K % 16 == 0 && reinterpret_cast<uintptr_t>(w.raw()) % 16 == 0,
            fmt::format("weight rows must be 16-byte aligned (K = {}, a multiple of 16)", K));
  c.require(reinterpret_cast<uintptr_t>(a.x.raw()) % 16 == 0 && (T == 1 || a.x.stride(0) % 8 == 0),
            fmt::format("x rows must be 16-byte aligned (row stride {})", a.x.stride(0)));
  const int64_t stage = fp8_gemv_stage_bytes(T, K, is_w8a8(a));
  c.require(stage <= fp8_gemv_max_stage_bytes(),
            fmt::format("x [{}, {}] stages {} bytes of shared memory per block (at most {})", T, K,
                        stage, fp8_gemv_max_stage_bytes()));
  return c;
}
LinearLaunch fp8_launch_of(const LinearArgs& a) {
  LinearLaunch p = launch_of(a);
  if (is_w8a8(a)) {
    p.input_scale = a.w.input_scale;
    p.scale = a.w.input_scale * a.w.weight_scale;
  }
  return p;
}
void fp8_gemv_run(const LinearArgs& a, OpContext& ctx) {
  launch_linear_fp8_gemv(fp8_launch_of(a), stream_of(ctx));
}
// The streamed FP8 GEMV: the register one's limits, and only for large weights. Measured on the
// H200 (docs/BENCHMARKS.md, run 7): it wins on the 70 MB 9b MLP matrices (W8A8 up 26.0 -> 21.5
// us, down 28.2 -> 26.5 us) and loses on every Nano-3 matrix of 10-28 MB (in_proj 13.3 -> 15.9
// us, out_proj 7.3 -> 8.1 us): its ring takes longer to fill than a small matrix takes to read.
constexpr int64_t kFp8StreamMinWeightBytes = int64_t{48} << 20;
bool fp8_stream_supports(const LinearArgs& a, std::string* why) {
  if (!fp8_gemv_supports(a, why)) return false;
  if (a.w.weight.nbytes() < kFp8StreamMinWeightBytes) {
    if (why)
      *why = fmt::format("weights of {} bytes (the streamed GEMV pays from {} bytes)",
                         a.w.weight.nbytes(), kFp8StreamMinWeightBytes);
    return false;
  }
  return true;
}
void fp8_stream_run(const LinearArgs& a, OpContext& ctx) {
  launch_linear_fp8_stream(fp8_launch_of(a), stream_of(ctx));
}

bool cublaslt_supports(const LinearArgs& a, std::string* why) {
  ArgCheck c(why);
  check_common(c, a);
  if (!c) return false;
  if (a.w.weight.dtype() == DType::F8E4M3) {
    c.require(
        a.w.input_scale > 0.f,
        fmt::format(
            "fp8 weight without input_scale (W8A16) runs only in the small-M kernel (T <= {})",
            kSmallMMaxRows));
    c.require(a.x.dim(1) % 16 == 0, fmt::format("FP8 GEMM needs K % 16 == 0 (K = {})", a.x.dim(1)));
    // An e4m3 x is the GEMM's operand as it is (a quantized copy is contiguous).
    if (a.x.dtype() == DType::F8E4M3)
      c.require(
          reinterpret_cast<uintptr_t>(a.x.raw()) % 16 == 0 &&
              (a.x.dim(0) == 1 || a.x.stride(0) % 16 == 0),
          fmt::format("FP8 GEMM needs e4m3 x rows 16-byte aligned (row stride {})", a.x.stride(0)));
    // Also for a single output row: cuBLASLt's FP8 heuristic refuses an odd leading dimension
    // even then (seen on the H200 for N = 11002, T = 1: "not supported").
    c.require(a.out.stride(0) % 8 == 0,
              fmt::format("FP8 GEMM needs an output row stride multiple of 8 (stride {})",
                          a.out.stride(0)));
  }
  return c;
}
void cublaslt_run(const LinearArgs& a, OpContext& ctx) {
  LinearLaunch p = launch_of(a);
  void* s = stream_of(ctx);
  Tensor scratch;
  if (is_w8a8(a)) {
    quantize_input(a, p, scratch, s);
  } else if (a.x.dtype() == DType::BF16 && p.wt == DType::F32) {
    // f32 router weight: widen x, then an exact-f32 GEMM.
    scratch = Tensor::empty(Shape{a.x.dim(0), a.x.dim(1)}, DType::F32, Device::Cuda);
    launch_rows_to_f32(p.x, scratch.data<float>(), s);
    p.x = Mat{scratch.raw(), a.x.dim(0), a.x.dim(1), a.x.dim(1), DType::F32};
  }
  linear_cublaslt(p, context_of(ctx), s);
}

}  // namespace

STRATA_REGISTER_KERNEL(LinearArgs, "cuda.fp8_stream", Device::Cuda, fp8_stream_supports,
                       fp8_stream_run);
STRATA_REGISTER_KERNEL(LinearArgs, "cuda.fp8_gemv", Device::Cuda, fp8_gemv_supports, fp8_gemv_run);
STRATA_REGISTER_KERNEL(LinearArgs, "cuda.small_m", Device::Cuda, small_m_supports, small_m_run);
STRATA_REGISTER_KERNEL(LinearArgs, "cuda.cublaslt", Device::Cuda, cublaslt_supports, cublaslt_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
