// Registration of sample on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include <cmath>

#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/sample.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::SampleArgs;

bool sample_supports(const SampleArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.logits, "logits").on_device(a.ids, "ids").dtype(a.logits, DType::F32, "logits");
  c.dtype(a.ids, DType::I32, "ids").rows(a.logits, -1, -1, "logits");
  if (!c) return false;
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
  c.require(static_cast<int64_t>(a.rows.size()) == B,
            fmt::format("{} sampling rows for {} logits rows", a.rows.size(), B));
  c.contiguous(a.ids, Shape{B}, "ids").require(V >= 1, "the vocabulary must not be empty");
  c.require(B * V < (int64_t{1} << 31),
            fmt::format("{} x {} logits: more than 2^31 for one sort", B, V));
  return c;
}

void sample_run(const SampleArgs& a, OpContext& ctx) {
  bool any_random = false;
  for (size_t b = 0; b < a.rows.size(); ++b) {
    const ops::SamplingRow& r = a.rows[b];
    if (!(std::isfinite(r.temperature) && r.temperature >= 0.f))
      fail("sample: row {} has temperature {}; it must be finite and >= 0", b, r.temperature);
    if (r.top_k < 0) fail("sample: row {} has top_k {}; it must be >= 0 (0 = off)", b, r.top_k);
    if (!(r.top_p > 0.f && r.top_p <= 1.f))
      fail("sample: row {} has top_p {}; it must be in (0, 1]", b, r.top_p);
    any_random |= r.temperature > 0.f;
  }
  SampleLaunch p;
  p.logits = mat_of(a.logits);
  p.ids = a.ids.data<int32_t>();
  p.any_random = any_random;
  Tensor scratch;
  if (any_random) {
    p.scratch_bytes = sample_scratch_bytes(a.logits.dim(0), a.logits.dim(1));
    scratch = Tensor::empty(Shape{static_cast<int64_t>(p.scratch_bytes)}, DType::U8, Device::Cuda);
    p.scratch = scratch.raw();
  }
  std::vector<SampleRow> rows(a.rows.size());
  for (size_t b = 0; b < rows.size(); ++b)
    rows[b] = SampleRow{a.rows[b].temperature, a.rows[b].top_k, a.rows[b].top_p, a.rows[b].seed,
                        a.rows[b].step};
  launch_sample(p, rows.data(), index_error_counter(), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(SampleArgs, "cuda", Device::Cuda, sample_supports, sample_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
