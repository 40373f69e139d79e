#include "ops/sample_plan.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "ops/sampling_math.h"

namespace strata::ops {

void SamplingEntries::begin_row() {
  rows_.emplace_back();
}

void SamplingEntries::add_penalty_token(int32_t token, int32_t output_count, bool in_prompt) {
  if (rows_.empty()) fail("SamplingEntries: add_penalty_token before begin_row");
  if (token < 0) fail("SamplingEntries: token id {} is negative", token);
  if (output_count < 0) fail("SamplingEntries: output count {} is negative", output_count);
  Entry& e = rows_.back()[token];
  e.count += output_count;
  e.in_prompt = e.in_prompt || in_prompt;
}

void SamplingEntries::add_bias(int32_t token, float bias) {
  if (rows_.empty()) fail("SamplingEntries: add_bias before begin_row");
  if (token < 0) fail("SamplingEntries: token id {} is negative", token);
  if (std::isnan(bias) || bias == INFINITY)
    fail("SamplingEntries: the bias of token {} is {}; it must be finite or -inf", token, bias);
  rows_.back()[token].bias += bias;
}

int64_t SamplingEntries::size() const {
  int64_t n = 0;
  for (const auto& r : rows_)
    n += static_cast<int64_t>(r.size());
  return n;
}

void SamplingEntries::fill(SampleArgs& a) const {
  const int64_t B = a.logits.defined() ? a.logits.dim(0) : rows();
  if (rows() != B) fail("SamplingEntries: {} rows begun for {} logits rows", rows(), B);
  const int64_t N = size();
  a.entry_offsets = a.entry_tokens = a.entry_counts = a.entry_in_prompt = a.entry_bias = Tensor();
  if (N == 0) return;
  a.entry_offsets = Tensor::empty(Shape{B + 1}, DType::I32);
  a.entry_tokens = Tensor::empty(Shape{N}, DType::I32);
  a.entry_counts = Tensor::empty(Shape{N}, DType::I32);
  a.entry_in_prompt = Tensor::empty(Shape{N}, DType::I32);
  a.entry_bias = Tensor::empty(Shape{N}, DType::F32);
  int32_t* off = a.entry_offsets.data<int32_t>();
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) {
    off[b] = static_cast<int32_t>(n);
    for (const auto& [token, e] : rows_[static_cast<size_t>(b)]) {  // std::map: ascending ids
      a.entry_tokens.data<int32_t>()[n] = token;
      a.entry_counts.data<int32_t>()[n] = e.count;
      a.entry_in_prompt.data<int32_t>()[n] = e.in_prompt ? 1 : 0;
      a.entry_bias.data<float>()[n] = e.bias;
      ++n;
    }
  }
  off[B] = static_cast<int32_t>(n);
}

namespace {

void check_row(const SamplingRow& r, size_t b) {
  if (!(std::isfinite(r.temperature) && r.temperature >= 0.f))
    fail("sample: row {} has temperature {}; it must be finite and >= 0", b, r.temperature);
  if (r.top_k < 0) fail("sample: row {} has top_k {}; it must be >= 0 (0 = off)", b, r.top_k);
  if (!(r.top_p > 0.f && r.top_p <= 1.f))
    fail("sample: row {} has top_p {}; it must be in (0, 1]", b, r.top_p);
  if (!(r.min_p >= 0.f && r.min_p <= 1.f))
    fail("sample: row {} has min_p {}; it must be in [0, 1]", b, r.min_p);
  if (!std::isfinite(r.presence_penalty) || !std::isfinite(r.frequency_penalty))
    fail("sample: row {} has presence / frequency penalties {} / {}; they must be finite", b,
         r.presence_penalty, r.frequency_penalty);
  if (!(std::isfinite(r.repetition_penalty) && r.repetition_penalty > 0.f))
    fail("sample: row {} has repetition_penalty {}; it must be finite and > 0", b,
         r.repetition_penalty);
  if (r.num_logprobs < -1 || r.num_logprobs > kMaxSampleLogprobs)
    fail("sample: row {} asks for {} logprobs; it must be -1 (none) or 0..{}", b, r.num_logprobs,
         kMaxSampleLogprobs);
}

void check_vec(const Tensor& t, const char* name, DType dt, int64_t n) {
  if (t.dtype() != dt || t.rank() != 1 || !t.is_contiguous() || (n >= 0 && t.dim(0) != n))
    fail("sample: {} is {}; it must be a contiguous {}[{}]", name, t.str(), dtype_name(dt),
         n >= 0 ? std::to_string(n) : std::string("N"));
}

void check_entry_contents(const SampleArgs& a, int64_t B, int64_t V) {
  const int32_t* off = a.entry_offsets.data<int32_t>();
  const int32_t* tok = a.entry_tokens.data<int32_t>();
  const int32_t* cnt = a.entry_counts.data<int32_t>();
  const int32_t* inp = a.entry_in_prompt.data<int32_t>();
  const float* bias = a.entry_bias.data<float>();
  const int64_t N = a.entry_tokens.dim(0);
  if (off[0] != 0 || off[B] != N)
    fail("sample: entry_offsets run from {} to {}; they must run from 0 to {}", off[0], off[B], N);
  for (int64_t b = 0; b < B; ++b) {
    if (off[b + 1] < off[b]) fail("sample: entry_offsets decrease at row {}", b);
    for (int64_t e = off[b]; e < off[b + 1]; ++e) {
      if (tok[e] < 0 || tok[e] >= V)
        fail("sample: row {} has an entry for token {}, outside the vocabulary of {}", b, tok[e],
             V);
      if (e > off[b] && tok[e] <= tok[e - 1])
        fail("sample: row {}'s entry tokens are not strictly increasing ({} after {})", b, tok[e],
             tok[e - 1]);
      if (cnt[e] < 0) fail("sample: row {} token {} has output count {}", b, tok[e], cnt[e]);
      if (inp[e] != 0 && inp[e] != 1)
        fail("sample: row {} token {} has in_prompt {}; it must be 0 or 1", b, tok[e], inp[e]);
      if (std::isnan(bias[e]) || bias[e] == INFINITY)
        fail("sample: row {} token {} has bias {}; it must be finite or -inf", b, tok[e], bias[e]);
    }
  }
}

}  // namespace

void check_sample_args(const SampleArgs& a, bool host_entries) {
  if (!a.logits.defined() || a.logits.rank() != 2 || a.logits.dtype() != DType::F32)
    fail("sample: logits must be an f32 [B, V] tensor");
  const int64_t B = a.logits.dim(0), V = a.logits.dim(1);
  if (V < 1) fail("sample: the vocabulary must not be empty");
  if (static_cast<int64_t>(a.rows.size()) != B)
    fail("sample: {} sampling rows for {} logits rows", a.rows.size(), B);
  for (size_t b = 0; b < a.rows.size(); ++b)
    check_row(a.rows[b], b);
  if (!a.ids.defined()) fail("sample: ids must be given");
  check_vec(a.ids, "ids", DType::I32, B);
  if (a.nonfinite.defined()) check_vec(a.nonfinite, "nonfinite", DType::I32, B);

  const Tensor* entries[] = {&a.entry_offsets, &a.entry_tokens, &a.entry_counts, &a.entry_in_prompt,
                             &a.entry_bias};
  int given = 0;
  for (const Tensor* t : entries)
    given += t->defined() ? 1 : 0;
  if (given != 0 && given != 5)
    fail("sample: the entry tensors (offsets, tokens, counts, in_prompt, bias) come together");
  if (given == 5) {
    check_vec(a.entry_offsets, "entry_offsets", DType::I32, B + 1);
    const int64_t N = a.entry_tokens.defined() ? a.entry_tokens.dim(0) : 0;
    check_vec(a.entry_tokens, "entry_tokens", DType::I32, N);
    check_vec(a.entry_counts, "entry_counts", DType::I32, N);
    check_vec(a.entry_in_prompt, "entry_in_prompt", DType::I32, N);
    check_vec(a.entry_bias, "entry_bias", DType::F32, N);
    if (N >= (int64_t{1} << 31)) fail("sample: {} entries: more than 2^31", N);
    if (host_entries) check_entry_contents(a, B, V);
  }

  const int32_t k = max_num_logprobs(a);
  if (k >= 0) {
    if (!a.sampled_logprob.defined() || !a.sampled_rank.defined())
      fail("sample: a row asks for logprobs; sampled_logprob and sampled_rank must be given");
    check_vec(a.sampled_logprob, "sampled_logprob", DType::F32, B);
    check_vec(a.sampled_rank, "sampled_rank", DType::I32, B);
  }
  if (k > 0 && (!a.top_ids.defined() || !a.top_logprobs.defined()))
    fail("sample: a row asks for {} top logprobs; top_ids and top_logprobs must be given", k);
  if (a.top_ids.defined() != a.top_logprobs.defined())
    fail("sample: top_ids and top_logprobs come together");
  if (a.top_ids.defined()) {
    for (const Tensor* t : {&a.top_ids, &a.top_logprobs})
      if (t->rank() != 2 || t->dim(0) != B || !t->is_contiguous() || t->dim(1) < std::max(k, 0))
        fail("sample: {} must be contiguous [{}, K] with K >= {}", t->str(), B, std::max(k, 0));
    if (a.top_ids.dtype() != DType::I32 || a.top_logprobs.dtype() != DType::F32 ||
        a.top_ids.dim(1) != a.top_logprobs.dim(1))
      fail("sample: top_ids must be i32 and top_logprobs f32, of one shape");
  }
}

int32_t max_num_logprobs(const SampleArgs& a) {
  int32_t k = -1;
  for (const SamplingRow& r : a.rows)
    k = std::max(k, r.num_logprobs);
  return k;
}

float log_min_p(float min_p) {
  return min_p > 0.f ? std::log(min_p) : -INFINITY;
}

}  // namespace strata::ops
