// Registration of take_ids on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/take_ids.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::TakeIdsArgs;

bool take_ids_supports(const TakeIdsArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.ids, "ids").on_device(a.src, "src").on_device(a.prev, "prev");
  c.dtype(a.ids, DType::I32, "ids").dtype(a.src, DType::I32, "src").dtype(a.prev, DType::I32, "prev");
  if (c)
    c.contiguous(a.ids, Shape{a.ids.numel()}, "ids")
        .contiguous(a.src, Shape{a.ids.numel()}, "src")
        .contiguous(a.prev, Shape{a.prev.numel()}, "prev");
  return c;
}

void take_ids_run(const TakeIdsArgs& a, OpContext& ctx) {
  launch_take_ids(a.ids.data<int32_t>(), a.src.data<int32_t>(), a.ids.numel(),
                  a.prev.data<int32_t>(), a.prev.numel(), context_of(ctx).index_errors(), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(TakeIdsArgs, "cuda", Device::Cuda, take_ids_supports, take_ids_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
