#include "engine/generator.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>

#include "core/check.h"
#include "engine/device.h"

namespace strata::engine {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void validate_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      fail("{}: token id {} at position {} is outside the vocabulary [0, {})", what, ids[i], i,
           vocab_size);
}

std::vector<int32_t> parse_token_id_list(std::string_view text, std::string_view what) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view item = text.substr(pos, comma - pos);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0 ||
        v > INT32_MAX)
      fail("{}: {:?} is not a token id (expected comma-separated non-negative integers)", what,
           item);
    ids.push_back(static_cast<int32_t>(v));
    pos = comma + 1;
  }
  return ids;
}

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
