// Host linear: out[t, n] = act(dot(x[t, :], W[n, :]) * scale), f32 dot in the fixed order of
// dot_f32. Work is split over output features n, so each weight row is converted to f32 once
// and applied to every token; every output element is computed by one thread. x is act, or
// e4m3 already quantized for a W8A8 weight (ops.h): then the host computes W8A8 too.
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/host/weight_rows.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

bool linear_supports(const LinearArgs& a, std::string* why) {
  ArgCheck c("linear", why);
  if (!(c.host(a.x, "x") && c.host(a.out, "out"))) return false;
  if (!c.that(a.x.rank() == 2, "x must be 2-D [T, K]")) return false;
  const int64_t T = a.x.dim(0), K = a.x.dim(1);
  if (!(c.dtype_in(a.x, "x", {DType::F32, DType::BF16, DType::F16, DType::F8E4M3}) &&
        c.rows(a.x, "x", T, K) && weight_supported(c, a.w, "weight", -1, K)))
    return false;
  if (a.x.dtype() == DType::F8E4M3 &&
      !c.that(a.w.weight.dtype() == DType::F8E4M3 && a.w.input_scale > 0.f,
              "x f8e4m3 needs a W8A8 weight (e4m3 with input_scale > 0) that it was quantized for"))
    return false;
  return c.float_act(a.out, "out") && c.rows(a.out, "out", T, a.w.out_features());
}

void linear_run(const LinearArgs& a, OpContext&) {
  const RowsView x(a.x), out(a.out);
  const int64_t T = x.rows, K = x.cols, N = out.cols;
  std::vector<float> xs(static_cast<size_t>(T * K));  // [T, K] f32
  for (int64_t t = 0; t < T; ++t)
    x.load(t, xs.data() + t * K);
  // An e4m3 x holds x / input_scale (quantized by its producer): W8A8, computed exactly in f32.
  const float scale =
      weight_output_scale(a.w) * (a.x.dtype() == DType::F8E4M3 ? a.w.input_scale : 1.f);
  const size_t es = dtype_size(out.dtype);
  parallel_for(N, [&](int64_t n0, int64_t n1) {
    std::vector<float> wrow(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      load_weight_row(a.w, n, wrow.data());
      for (int64_t t = 0; t < T; ++t) {
        const float y = dot_f32(xs.data() + t * K, wrow.data(), K) * scale;
        store_f32(out.base + static_cast<size_t>(t * out.row_stride + n) * es, out.dtype, 1, &y);
      }
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(LinearArgs, "host", Device::Host, linear_supports, linear_run);

}  // namespace strata::ops::host
