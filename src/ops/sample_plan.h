// Host-side helpers of the sample op shared by its kernels and its callers: the builder of the
// sparse per-row entries (penalties and logit bias as one CSR list), and the argument checks
// both backends run before sampling.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "ops/ops.h"

namespace strata::ops {

// Builds SampleArgs' entry_* tensors on the host, one row after the other (rows without
// entries are just begun). Entries for the same token merge: counts add, in_prompt ors, biases
// add. The engine uploads the tensors with the step's other inputs.
class SamplingEntries {
 public:
  void begin_row();  // the next row (call once per row, B times)
  // `token` occurs `output_count` times in the row's output, and in its prompt when in_prompt.
  void add_penalty_token(int32_t token, int32_t output_count, bool in_prompt);
  // A logit bias on `token` (-inf bans it: min_tokens adds its stop ids that way).
  void add_bias(int32_t token, float bias);
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t size() const;  // entries so far
  // Sets a.entry_* to host tensors (undefined when no row has an entry); rows() must equal B.
  void fill(SampleArgs& a) const;

 private:
  struct Entry {
    int32_t count = 0;
    bool in_prompt = false;
    float bias = 0.f;
  };
  std::vector<std::map<int32_t, Entry>> rows_;
};

// Validates what both kernels rely on before they run (throws with the row and the field):
// shapes and dtypes of every tensor given, the row parameters' ranges, and the logprob outputs
// a row asks for. `host_entries` also checks the entries' contents (host tensors only).
void check_sample_args(const SampleArgs& a, bool host_entries);

// The largest num_logprobs over the rows (-1 when no row wants logprobs).
int32_t max_num_logprobs(const SampleArgs& a);

// log(min_p) as the kernels compare it (-inf when min_p is 0).
float log_min_p(float min_p);

}  // namespace strata::ops
