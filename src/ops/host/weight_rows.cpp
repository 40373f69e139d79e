#include "ops/host/weight_rows.h"

#include <cmath>

namespace strata::ops::host {

bool weight_supported(ArgCheck& c, const LinearWeight& w, const char* name, int64_t N, int64_t K) {
  if (!c.host(w.weight, name)) return false;
  if (!c.dtype_in(w.weight, name, {DType::BF16, DType::F32, DType::F16, DType::F8E4M3}))
    return false;
  if (!c.that(w.weight.rank() == 2, "weights must be 2-D [N, K]")) return false;
  if (!c.rows(w.weight, name, N < 0 ? w.weight.dim(0) : N, K < 0 ? w.weight.dim(1) : K))
    return false;
  if (w.weight.dtype() == DType::F8E4M3 && !(std::isfinite(w.weight_scale) && w.weight_scale > 0.f))
    return c.fail("{} is f8e4m3 with weight_scale {}; it must be finite and > 0", name,
                  w.weight_scale);
  return true;
}

}  // namespace strata::ops::host
