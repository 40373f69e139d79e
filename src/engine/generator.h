// Single-sequence generation over an Executor: prefill the prompt (whole, or in chunks that
// continue from the cached state), then decode one token per step (through the executor's
// decode graph on CUDA) until max_tokens or a stop id. The tests' and tools' one-request
// path; many requests go through LLMEngine (engine.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/executor.h"
#include "engine/token_ids.h"
#include "engine/sampling_params.h"
#include "model/nemotron_h/model.h"

namespace strata::engine {

struct GeneratorOptions {
  int64_t max_context = 4096;  // prompt + generated tokens the caches are sized for
  int64_t prefill_chunk = 0;   // tokens per prefill step; 0 = the whole prompt at once
  int64_t block_size = 16;     // KV block size
  bool cuda_graphs = true;     // decode steps through the executor's graph (CUDA)
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (a stop id that ended it included)
  std::string finish_reason;    // "stop" (a stop id) or "length" (max_tokens)
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

class Generator {
 public:
  Generator(model::NemotronHModel& model, Device device, const GeneratorOptions& options);

  // Throws strata::Error for a bad prompt (empty, ids outside the vocabulary, too long for the
  // caches) or bad parameters. `on_token` sees each id as soon as it is sampled.
  GenerationResult generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                            const std::function<void(int32_t)>& on_token = {});

  OpContext& context() { return executor_.context(); }
  Executor& executor() { return executor_; }

 private:
  model::NemotronHModel& model_;
  GeneratorOptions options_;
  Executor executor_;
};

}  // namespace strata::engine
