// Registration of sample on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include <cmath>

#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/sample.h"
#include "ops/ops.h"
#include "ops/sample_plan.h"
#include "ops/sampling_math.h"

namespace strata::cuda {
namespace {

using ops::SampleArgs;

// The largest vocabulary: the scan kernels keep a bitmap of V bits in shared memory.
constexpr int64_t kMaxVocab = 262144;

bool sample_supports(const SampleArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.logits, "logits").on_device(a.ids, "ids").dtype(a.logits, DType::F32, "logits");
  c.dtype(a.ids, DType::I32, "ids").rows(a.logits, -1, -1, "logits");
  SampleArgs handles = a;  // visit() is not const; tensors are handles
  handles.visit([&](Tensor& t, ops::Role) { c.on_device(t, "every tensor of the op"); });
  if (!c) return false;
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
  c.require(static_cast<int64_t>(a.rows.size()) == B,
            fmt::format("{} sampling rows for {} logits rows", a.rows.size(), B));
  c.contiguous(a.ids, Shape{B}, "ids").require(V >= 1, "the vocabulary must not be empty");
  c.require(V <= kMaxVocab,
            fmt::format("vocabulary {} > {} (the listed-token bitmap's size)", V, kMaxVocab));
  return c;
}

void sample_run(const SampleArgs& a, OpContext& ctx) {
  ops::check_sample_args(a, /*host_entries=*/false);
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
  std::vector<SampleRow> rows(static_cast<size_t>(B));
  std::vector<int32_t> sorted;
  for (int64_t b = 0; b < B; ++b) {
    const ops::SamplingRow& r = a.rows[static_cast<size_t>(b)];
    SampleRow& d = rows[static_cast<size_t>(b)];
    d.temperature = r.temperature;
    d.top_p = r.top_p;
    d.log_min_p = ops::log_min_p(r.min_p);
    d.presence = r.presence_penalty;
    d.frequency = r.frequency_penalty;
    d.repetition = r.repetition_penalty;
    d.top_k = r.top_k;
    d.num_logprobs = r.num_logprobs;
    d.path = ops::sample_path(r.temperature, r.top_k, r.top_p);
    d.key = ops::sampling_bits(r.seed, r.step);
    if (d.path == ops::kPathSorted) sorted.push_back(static_cast<int32_t>(b));
  }
  auto ptr = [](const Tensor& t) { return t.defined() ? t.raw() : nullptr; };
  SampleLaunch p;
  p.logits = mat_of(a.logits);
  p.entry_offsets = static_cast<const int32_t*>(ptr(a.entry_offsets));
  p.entry_tokens = static_cast<const int32_t*>(ptr(a.entry_tokens));
  p.entry_counts = static_cast<const int32_t*>(ptr(a.entry_counts));
  p.entry_in_prompt = static_cast<const int32_t*>(ptr(a.entry_in_prompt));
  p.entry_bias = static_cast<const float*>(ptr(a.entry_bias));
  p.ids = a.ids.data<int32_t>();
  p.nonfinite = static_cast<int32_t*>(ptr(a.nonfinite));
  p.sampled_logprob = static_cast<float*>(ptr(a.sampled_logprob));
  p.sampled_rank = static_cast<int32_t*>(ptr(a.sampled_rank));
  p.top_ids = static_cast<int32_t*>(ptr(a.top_ids));
  p.top_logprobs = static_cast<float*>(ptr(a.top_logprobs));
  p.top_width = a.top_ids.defined() ? a.top_ids.dim(1) : 0;
  p.rows = rows.data();
  p.sorted_rows = sorted.data();
  p.num_sorted = static_cast<int64_t>(sorted.size());
  p.any_logprobs = ops::max_num_logprobs(a) >= 0;
  const size_t bytes = sample_scratch_bytes(B, V, p.num_sorted);
  Tensor scratch = Tensor::empty(Shape{static_cast<int64_t>(bytes)}, DType::U8, Device::Cuda);
  p.scratch = scratch.raw();
  launch_sample(p, context_of(ctx).index_errors(), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(SampleArgs, "cuda", Device::Cuda, sample_supports, sample_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
