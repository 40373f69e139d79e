// The arithmetic of the sampler that the host kernel (ops/host/sample.cpp) and the CUDA kernels
// (ops/cuda/sample.cu) must do identically, so both pick the same token for a row. Every f32
// operation here is a single IEEE-rounded operation on both sides: the device spells them as
// __fadd_rn / __fmul_rn / __fdiv_rn so nvcc cannot contract a multiply and an add into an FMA
// (the host build targets x86-64 without FMA, where no contraction happens).
//
// Per row, in vLLM V1's order (vllm/v1/sample/sampler.py):
//   z_v  = raw_v + bias_v                                   logit bias (sparse)
//   z_v  = z_v > 0 ? z_v / rep : z_v * rep                  repetition, tokens in prompt or output
//   z_v -= frequency * count_v;  z_v -= presence [count_v > 0]      output-token penalties
//   greedy rows (temperature < 1e-5, vLLM's epsilon): argmax z (lowest id on ties)
//   s_v  = (z_v - max z) / T                                 temperature (f32)
//   min_p keeps s_v >= log(min_p); top_k keeps the k largest z (lowest id first on ties);
//   top_p keeps the shortest prefix, in that order, whose mass sum exp(s_v) reaches top_p times
//   the kept mass; the token is argmax over the kept set of z_v / T + gumbel_noise(key, v).
#pragma once

#include <cstdint>

#include "ops/sampling_rng.h"

namespace strata::ops {

// Temperatures below this sample greedily (vLLM's _SAMPLING_EPS); their logprobs use T = 1.
constexpr float kGreedyTemperature = 1e-5f;
// The most top logprobs a row may ask for (OpenAI's top_logprobs limit; the device keeps a
// per-thread list of this length).
constexpr int kMaxSampleLogprobs = 20;

// How a row is sampled, cheapest first (see the cost notes in ops/cuda/sample.cu).
enum SamplePath : int32_t {
  kPathGreedy = 0,  // argmax
  kPathRace = 1,    // Gumbel race over the vocabulary (min_p at most): no sort
  kPathSorted = 2,  // top_k or top_p: the row's vocabulary is sorted
};

STRATA_HD inline int32_t sample_path(float temperature, int32_t top_k, float top_p) {
  if (temperature < kGreedyTemperature) return kPathGreedy;
  return (top_k > 0 || top_p < 1.f) ? kPathSorted : kPathRace;
}

#if defined(__CUDA_ARCH__)
STRATA_HD inline float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
STRATA_HD inline float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
STRATA_HD inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
STRATA_HD inline float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
#else
inline float add_rn(float a, float b) {
  return a + b;
}
inline float sub_rn(float a, float b) {
  return a - b;
}
inline float mul_rn(float a, float b) {
  return a * b;
}
inline float div_rn(float a, float b) {
  return a / b;
}
#endif

// A logit without a sparse entry, as processed: -0 becomes +0 so that "ties by lower id" means
// the same thing to a comparison (host) and to a radix sort on the bits (device).
STRATA_HD inline float plain_logit(float raw) {
  return add_rn(raw, 0.f);
}

// A logit with a sparse entry: bias, then the penalties (vLLM's apply_penalties).
STRATA_HD inline float processed_logit(float raw, float bias, int32_t output_count, bool in_prompt,
                                       float presence, float frequency, float repetition) {
  float z = add_rn(raw, bias);
  if (output_count > 0 || in_prompt) z = z > 0.f ? div_rn(z, repetition) : mul_rn(z, repetition);
  z = sub_rn(z, mul_rn(frequency, static_cast<float>(output_count)));
  if (output_count > 0) z = sub_rn(z, presence);
  return add_rn(z, 0.f);
}

// The race value of a token with processed logit z: a draw is the argmax of these (ties, which
// need equal doubles, go to the lower id).
STRATA_HD inline double race_value(float z, float temperature, uint64_t row_key, int64_t v) {
  return static_cast<double>(div_rn(z, temperature)) + gumbel_noise(row_key, v);
}

// The temperature-scaled logit relative to the row maximum m: min_p and top_p work on it.
STRATA_HD inline float scaled_logit(float z, float m, float temperature) {
  return div_rn(sub_rn(z, m), temperature);
}

}  // namespace strata::ops
