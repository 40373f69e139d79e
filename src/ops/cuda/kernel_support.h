// Argument checks shared by the CUDA kernels' `supports` functions, and the conversions from
// checked tensors to the launchers' plain views. Each check returns false and explains itself
// in *why, so a refused op names the tensor and the problem.
#pragma once

#include <string>

#include "core/tensor.h"
#include "ops/cuda/device_context.h"
#include "ops/cuda/device_views.h"
#include "ops/registry.h"

namespace strata::cuda {

class ArgCheck {
 public:
  explicit ArgCheck(std::string* why) : why_(why) {}
  bool ok() const { return ok_; }
  operator bool() const { return ok_; }

  // The tensor exists and lives on the CUDA device.
  ArgCheck& on_device(const Tensor& t, const char* name);
  ArgCheck& dtype(const Tensor& t, DType d, const char* name);
  ArgCheck& act(const Tensor& t, const char* name);  // f32 or bf16
  ArgCheck& same_dtype(const Tensor& a, const Tensor& b, const char* na, const char* nb);
  // Rank 2, [rows, cols] (-1 = any), innermost stride 1, row stride >= cols.
  ArgCheck& rows(const Tensor& t, int64_t rows, int64_t cols, const char* name);
  // Contiguous with exactly this shape.
  ArgCheck& contiguous(const Tensor& t, const Shape& shape, const char* name);
  // A free-form condition.
  ArgCheck& require(bool cond, const std::string& what);
  // Fails the check with `what` (for reasons computed by the caller).
  ArgCheck& fail(const std::string& what) { return require(false, what); }

 private:
  ArgCheck& bad(const std::string& msg);
  std::string* why_;
  bool ok_ = true;
};

Mat mat_of(const Tensor& t);  // rank-2 view (checked with ArgCheck::rows)
Mat opt_mat_of(const Tensor& t);  // mat_of, or an empty Mat (p null) for an undefined tensor

// A producer's optional e4m3 copy of its output (ops::QuantizedOut): checks that `out` or
// `out_q` is given and out_q (when given) is [rows, cols] e4m3 rows on the device with a
// scale > 0. quant_out_of gives the launchers' view (p null when absent).
void check_quantized_out(ArgCheck& c, const Tensor& out, const Tensor& out_q, float scale,
                         int64_t rows, int64_t cols);
QuantOut quant_out_of(const Tensor& out_q, float scale);
Vec vec_of(const Tensor& t);  // contiguous; an undefined tensor gives an empty Vec

// The stream kernels of this context run on.
void* stream_of(const OpContext& ctx);

// A/B benchmarking knob: STRATA_CUDA_DISABLE_KERNELS="op:kernel,..." (e.g.
// "moe_experts:cuda.grouped_mma,attention:cuda.flash"), read once. The kernels that consult it
// refuse with that reason, so ops::run takes the next one.
bool kernel_disabled(const char* op, const char* kernel);

// Rows from which the one-warp forms of gated_rms_norm and moe_route run (`cuda.warp`): measured
// on the H200 (bench-kernels small-op rows) faster than the block forms at 512 and 2,048 rows,
// slower at 1 and 8. STRATA_WARP_FORM_MIN_ROWS overrides it (read once; the bench sets 1 to time
// the warp forms at every size).
constexpr int64_t kWarpFormMinRows = 64;
int64_t warp_form_min_rows();

}  // namespace strata::cuda
