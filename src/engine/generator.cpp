#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "engine/device.h"

namespace strata::engine {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

namespace {
ExecutorConfig executor_config(const GeneratorOptions& o, const model::NemotronHModel& m,
                               Device device) {
  if (o.prefill_chunk < 0) fail("prefill chunk must be >= 0, got {}", o.prefill_chunk);
  if (o.max_context < 1) fail("the context must hold at least one token, got {}", o.max_context);
  const model::ModelConfig& c = m.config();
  if (c.max_position_embeddings > 0 && o.max_context > c.max_position_embeddings)
    fail(
        "prompt plus max_tokens ({} tokens) exceeds the model's context length ({}, "
        "max_position_embeddings)",
        o.max_context, c.max_position_embeddings);
  ExecutorConfig ec;
  ec.device = device;
  ec.max_num_seqs = 1;
  ec.max_model_len = o.max_context;
  ec.block_size = o.block_size;
  ec.cache_plan = cache::plan_cache_for_tokens(c, 1, o.max_context, o.block_size, m.act_dtype());
  ec.cuda_graphs = o.cuda_graphs;
  return ec;
}
}  // namespace

Generator::Generator(model::NemotronHModel& model, Device device, const GeneratorOptions& options)
    : model_(model), options_(options), executor_(model, executor_config(options, model, device)) {}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt,
                                     const SamplingParams& params,
                                     const std::function<void(int32_t)>& on_token) {
  const model::ModelConfig& c = model_.config();
  params.validate(c.vocab_size);
  if (prompt.empty()) fail("the prompt is empty");
  validate_token_ids(prompt, c.vocab_size, "prompt");
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  if (total > options_.max_context)
    fail("prompt ({} tokens) plus max_tokens ({}) exceeds the context the caches hold ({})",
         prompt.size(), params.max_tokens, options_.max_context);

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  ExecutorSequence seq(executor_, total);
  const uint64_t seed = params.seed.value_or(0);
  SamplingBatch batch;
  batch.rows = {params.row(seed, 0)};

  auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : n;
  Tensor logits;
  for (int64_t done = 0; done < n; done += chunk) {
    const int64_t len = std::min(chunk, n - done);
    logits = seq.forward(std::vector<int32_t>(prompt.begin() + done, prompt.begin() + done + len),
                         LogitRows::LastPerSequence);  // [1, V] f32
  }
  int32_t id = executor_.sample(logits, batch).ids[0];
  result.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < params.max_tokens; ++i) {
    if (id < 0) fail("non-finite logits at position {}", seq.computed() - 1);
    result.tokens.push_back(id);
    if (on_token) on_token(id);
    const bool stop = !params.ignore_eos &&
                      std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) !=
                          params.stop_token_ids.end();
    if (stop) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == params.max_tokens) break;
    id = seq.step({id}, params.row(seed, static_cast<uint64_t>(i + 1))).ids[0];
  }
  if (result.finish_reason.empty()) result.finish_reason = "length";
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace strata::engine
