// Host take_ids: ids[t] = prev[src[t]] for src[t] >= 0 (ops.h TakeIdsArgs).
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

bool take_ids_supports(const TakeIdsArgs& a, std::string* why) {
  ArgCheck c("take_ids", why);
  if (!(c.host(a.ids, "ids") && c.host(a.src, "src") && c.host(a.prev, "prev"))) return false;
  const int64_t T = a.ids.rank() == 1 ? a.ids.dim(0) : -1;
  return c.index_vec(a.ids, "ids", T) && c.index_vec(a.src, "src", T) &&
         c.index_vec(a.prev, "prev", a.prev.rank() == 1 ? a.prev.dim(0) : -1);
}

void take_ids_run(const TakeIdsArgs& a, OpContext&) {
  const std::vector<int32_t> src = load_indices(a.src), prev = load_indices(a.prev);
  int32_t* ids = a.ids.data<int32_t>();
  const int64_t stride = a.ids.stride(0);
  for (size_t t = 0; t < src.size(); ++t) {
    if (src[t] < 0) continue;
    if (static_cast<size_t>(src[t]) >= prev.size())
      fail("take_ids: src[{}] = {} is outside the previous step's {} ids", t, src[t], prev.size());
    // A previous row flagged non-finite sampled -1: its sequence ends at that step, and the
    // row it has in this step is discarded; any valid id keeps the step's kernels in range.
    const int32_t id = prev[static_cast<size_t>(src[t])];
    ids[static_cast<int64_t>(t) * stride] = id < 0 ? 0 : id;
  }
}

}  // namespace

STRATA_REGISTER_KERNEL(TakeIdsArgs, "host", Device::Host, take_ids_supports, take_ids_run);

}  // namespace strata::ops::host
