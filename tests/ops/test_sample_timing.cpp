// Times the device sampler at decode batch sizes (B = 1, 256, 1024; V = 131072, the Nano-3
// vocabulary) on each path, so the costs written in ops/cuda/sample.cu are measured figures.
// GPU only: skips loudly without one. Prints one line per (B, path); asserts only that every
// configuration ran.
#include <gtest/gtest.h>

#include <cstdio>

#include "cases_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/sample_plan.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

struct Config {
  const char* name;
  SamplingRow row;
  int entries_per_row = 0;  // penalty entries (output tokens with counts, prompt tokens)
};

Tensor device_copy(const Tensor& t) {
  return t.defined() ? t.to(Device::Cuda) : Tensor();
}

TEST(SampleTiming, DecodeBatches) {
  std::string why;
  if (!cuda::device_available(&why)) {
    GTEST_SKIP() << "SKIPPED: sampler timing needs a CUDA GPU and this machine has none (" << why
                 << ").";
  }
  cuda::init_backend(0);
  const int64_t V = 131072;
  SamplingRow greedy, race, min_p, penalties, top_k, top_p, logprobs;
  race.temperature = min_p.temperature = penalties.temperature = 0.8f;
  top_k.temperature = top_p.temperature = logprobs.temperature = 0.8f;
  min_p.min_p = 0.05f;
  penalties.repetition_penalty = 1.1f;
  penalties.frequency_penalty = 0.3f;
  top_k.top_k = 50;
  top_p.top_p = 0.9f;
  logprobs.num_logprobs = 5;
  const Config configs[] = {{"greedy", greedy},
                            {"race (temperature)", race},
                            {"race + min_p", min_p},
                            {"race + 256 penalties", penalties, 256},
                            {"top_k 50 (sorted)", top_k},
                            {"top_p 0.9 (sorted)", top_p},
                            {"race + 5 logprobs", logprobs}};
  int64_t ran = 0;
  Rng rng(77);
  for (const int64_t B : {int64_t{1}, int64_t{256}, int64_t{1024}}) {
    Tensor host = Tensor::empty(Shape{B, V}, DType::F32);
    float* l = host.data<float>();
    for (int64_t i = 0; i < B * V; ++i)
      l[i] = rng.uniform(-8.f, 8.f);
    const Tensor logits = host.to(Device::Cuda);
    for (const Config& c : configs) {
      SampleArgs a;
      a.logits = logits;
      for (int64_t b = 0; b < B; ++b) {
        SamplingRow r = c.row;
        r.seed = static_cast<uint64_t>(b);
        a.rows.push_back(r);
      }
      if (c.entries_per_row > 0) {
        SamplingEntries se;
        for (int64_t b = 0; b < B; ++b) {
          se.begin_row();
          for (int32_t t : distinct(rng, c.entries_per_row, V))
            se.add_penalty_token(t, rng.int_in(0, 3), rng.int_in(0, 1) == 1);
        }
        se.fill(a);
        a.entry_offsets = device_copy(a.entry_offsets);
        a.entry_tokens = device_copy(a.entry_tokens);
        a.entry_counts = device_copy(a.entry_counts);
        a.entry_in_prompt = device_copy(a.entry_in_prompt);
        a.entry_bias = device_copy(a.entry_bias);
      }
      a.ids = Tensor::empty(Shape{B}, DType::I32, Device::Cuda);
      a.nonfinite = Tensor::empty(Shape{B}, DType::I32, Device::Cuda);
      if (c.row.num_logprobs >= 0) {
        a.sampled_logprob = Tensor::empty(Shape{B}, DType::F32, Device::Cuda);
        a.sampled_rank = Tensor::empty(Shape{B}, DType::I32, Device::Cuda);
        a.top_ids = Tensor::empty(Shape{B, c.row.num_logprobs}, DType::I32, Device::Cuda);
        a.top_logprobs = Tensor::empty(Shape{B, c.row.num_logprobs}, DType::F32, Device::Cuda);
      }
      const double ms = cuda::time_ms(
          [&] {
            OpContext ctx;
            cuda::bind(ctx);
            ops::run(ctx, a);
          },
          2, 10);
      const double gbs = static_cast<double>(B * V) * 4 / (ms * 1e-3) / 1e9;
      std::printf("sample B=%-5lld V=%lld %-22s %9.1f us  (%6.0f GB/s of logits read once)\n",
                  static_cast<long long>(B), static_cast<long long>(V), c.name, ms * 1e3, gbs);
      std::fflush(stdout);
      EXPECT_EQ(cuda::take_index_errors(), 0);
      ++ran;
    }
  }
  EXPECT_EQ(ran, 3 * 7);
}

}  // namespace
}  // namespace strata::opstest
