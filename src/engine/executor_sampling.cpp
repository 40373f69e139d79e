// The executor's sampling half: one sample op over a step's logits, its sparse per-row inputs
// uploaded in one copy, and every output (ids, non-finite flags, logprobs) written into one
// device buffer that comes back to the host in one asynchronous copy (pinned memory and an
// event on CUDA), so launch() can return while the device works.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "engine/device.h"
#include "engine/executor.h"
#include "engine/executor_in_flight.h"
#include "ops/sample_plan.h"
#include "ops/token_mask_args.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_check.h"
#endif

namespace strata::engine {

Executor::InFlight::~InFlight() {
#ifdef STRATA_HAVE_CUDA
  if (pinned) cudaFreeHost(pinned);
  if (staging) cudaFreeHost(staging);
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
#endif
}

int32_t* Executor::InFlight::stage(size_t words) {
#ifdef STRATA_HAVE_CUDA
  if (staging_words < words) {
    if (staging) STRATA_CUDA_CHECK(cudaFreeHost(staging));
    staging = nullptr;
    const size_t grown = std::max(words, 2 * staging_words);
    void* p = nullptr;
    STRATA_CUDA_CHECK(cudaMallocHost(&p, grown * sizeof(int32_t)));
    staging = static_cast<int32_t*>(p);
    staging_words = grown;
  }
  return staging;
#else
  (void)words;
  fail("executor: this build has no CUDA backend");
#endif
}

namespace {

// A typed view of `n` words of `buf` from word `at` (i32 and f32 share the 4-byte words).
Tensor view(const Tensor& buf, int64_t at, const Shape& shape, DType dt) {
  return Tensor::wrap(static_cast<int32_t*>(buf.raw()) + at, shape, dt, buf.device(),
                      buf.storage());
}

}  // namespace

void Executor::enqueue_sample(const Tensor& logits, const SamplingBatch& batch) {
  InFlight& f = next_slot();
  const int64_t B = logits.dim(0);
  if (static_cast<int64_t>(batch.rows.size()) != B)
    fail("executor: {} sampling rows for {} logit rows", batch.rows.size(), B);
  int64_t K = 0;
  bool lp = false;
  for (const ops::SamplingRow& r : batch.rows) {
    lp = lp || r.num_logprobs >= 0;
    K = std::max<int64_t>(K, r.num_logprobs);
  }
  K = std::max<int64_t>(K, 1);

  ops::SampleArgs s;
  s.logits = logits;
  s.rows = batch.rows;
  // Sparse entries: per row, the union of biased and penalised tokens, in increasing id order.
  bool any_entries = false;
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    any_entries = any_entries || (ub < batch.logit_bias.size() && !batch.logit_bias[ub].empty()) ||
                  (ub < batch.penalty_tokens.size() && !batch.penalty_tokens[ub].empty());
  }
  if (any_entries) {
    ops::SamplingEntries entries;
    for (int64_t b = 0; b < B; ++b) {
      const auto ub = static_cast<size_t>(b);
      entries.begin_row();
      if (ub < batch.penalty_tokens.size())
        for (const auto& t : batch.penalty_tokens[ub])
          entries.add_penalty_token(t.id, t.output_count, t.in_prompt);
      if (ub < batch.logit_bias.size())
        for (const auto& [id, v] : batch.logit_bias[ub]) entries.add_bias(id, v);
    }
    entries.fill(s);  // host tensors; on a device run they go up with the step
    if (ctx_->device != Device::Host)
      for (Tensor* t : {&s.entry_offsets, &s.entry_tokens, &s.entry_counts, &s.entry_in_prompt,
                        &s.entry_bias})
        if (t->defined()) {
          *t = t->to(ctx_->device);
          ++ctx_->h2d_copies;
        }
  }
  // Guided rows: disallowed tokens lose before any other processing.
  const bool any_mask = std::any_of(batch.token_mask.begin(), batch.token_mask.end(),
                                    [](const auto& m) { return !m.empty(); });
  if (any_mask) {
    const int64_t V = logits.dim(1), W = (V + 31) / 32;
    ops::TokenMaskArgs m;
    m.logits = logits;
    m.mask = Tensor::empty(Shape{B, W}, DType::I32);
    auto* words = reinterpret_cast<uint32_t*>(m.mask.data<int32_t>());
    for (int64_t b = 0; b < B; ++b) {
      const auto ub = static_cast<size_t>(b);
      const bool has = ub < batch.token_mask.size() && !batch.token_mask[ub].empty();
      if (has && static_cast<int64_t>(batch.token_mask[ub].size()) != W)
        fail("executor: row {} has a token mask of {} words for {} logits", b,
             batch.token_mask[ub].size(), V);
      for (int64_t w = 0; w < W; ++w)
        words[b * W + w] = has ? batch.token_mask[ub][static_cast<size_t>(w)] : ~0u;
    }
    if (ctx_->device != Device::Host) {
      m.mask = m.mask.to(ctx_->device);
      ++ctx_->h2d_copies;
    }
    ops::run(*ctx_, m);
  }
  // Every output in one buffer: one copy back.
  const int64_t words = InFlight::words(B, K, lp);
  f.out = Tensor::empty(Shape{words}, DType::I32, ctx_->device);
  s.ids = view(f.out, 0, Shape{B}, DType::I32);
  s.nonfinite = view(f.out, B, Shape{B}, DType::I32);
  if (lp) {
    s.sampled_logprob = view(f.out, 2 * B, Shape{B}, DType::F32);
    s.sampled_rank = view(f.out, 3 * B, Shape{B}, DType::I32);
    s.top_ids = view(f.out, 4 * B, Shape{B, K}, DType::I32);
    s.top_logprobs = view(f.out, 4 * B + B * K, Shape{B, K}, DType::F32);
  }
  ops::run(*ctx_, s);
  last_ids_ = s.ids;
  f.B = B;
  f.K = K;
  f.logprobs = lp;
  f.launched = true;
  ++launched_;
#ifdef STRATA_HAVE_CUDA
  if (ctx_->device != Device::Host) {
    const size_t bytes = static_cast<size_t>(words) * sizeof(int32_t);
    if (f.pinned_bytes < bytes) {
      if (f.pinned) STRATA_CUDA_CHECK(cudaFreeHost(f.pinned));
      f.pinned = nullptr;
      STRATA_CUDA_CHECK(cudaMallocHost(&f.pinned, bytes));
      f.pinned_bytes = bytes;
    }
    if (!f.event) {
      cudaEvent_t e = nullptr;
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      f.event = e;
    }
    auto stream = static_cast<cudaStream_t>(ctx_->stream);
    cuda::context_of(*ctx_).copy_d2h_async(f.pinned, f.out.raw(), bytes);
    STRATA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(f.event), stream));
    ++ctx_->d2h_copies;
  }
#endif
}

SampledStep Executor::collect() {
  DeviceScope scope(*ctx_);
  if (launched_ == 0) fail("executor: collect() with no launched step");
  InFlight& f = *ring_[head_];
  f.launched = false;
  head_ = (head_ + 1) % 2;
  --launched_;
  const int32_t* w = nullptr;
  if (ctx_->device == Device::Host) {
    w = f.out.data<int32_t>();
  } else {
#ifdef STRATA_HAVE_CUDA
    STRATA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(f.event)));
    w = static_cast<const int32_t*>(f.pinned);
#else
    fail("executor: this build has no CUDA backend");
#endif
  }
  const int64_t B = f.B, K = f.K;
  auto f32 = [&](int64_t i) {
    float v;
    std::memcpy(&v, w + i, sizeof v);
    return v;
  };
  SampledStep out;
  out.ids.assign(w, w + B);
  out.nonfinite.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) out.nonfinite[static_cast<size_t>(b)] = w[B + b] != 0 ? 1 : 0;
  if (f.logprobs) {
    out.logprobs.resize(static_cast<size_t>(B));
    out.ranks.resize(static_cast<size_t>(B));
    out.top_logprobs.resize(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      out.logprobs[static_cast<size_t>(b)] = f32(2 * B + b);
      out.ranks[static_cast<size_t>(b)] = w[3 * B + b];
      auto& top = out.top_logprobs[static_cast<size_t>(b)];
      for (int64_t k = 0; k < K; ++k) {
        const int32_t id = w[4 * B + b * K + k];
        if (id >= 0) top.emplace_back(id, f32(4 * B + B * K + b * K + k));
      }
    }
  }
  return out;
}

}  // namespace strata::engine
