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
// The context the caches are sized for, validated before anything is allocated.
const GeneratorOptions& checked(const GeneratorOptions& o, const model::ModelConfig& c) {
  if (o.prefill_chunk < 0) fail("prefill chunk must be >= 0, got {}", o.prefill_chunk);
  if (o.max_context < 1) fail("the context must hold at least one token, got {}", o.max_context);
  if (c.max_position_embeddings > 0 && o.max_context > c.max_position_embeddings)
    fail(
        "prompt plus max_tokens ({} tokens) exceeds the model's context length ({}, "
        "max_position_embeddings)",
        o.max_context, c.max_position_embeddings);
  return o;
}
}  // namespace

Generator::Generator(model::NemotronHModel& model, Device device, const GeneratorOptions& options)
    : model_(model),
      options_(checked(options, model.config())),
      device_ready_((prepare_device(device, ctx_), true)),
      cache_(model.config(),
             cache::plan_cache_for_tokens(model.config(), 1, options.max_context,
                                          options.block_size, model.act_dtype()),
             device) {}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt,
                                     const SamplingParams& params,
                                     const std::function<void(int32_t)>& on_token) {
  const model::ModelConfig& c = model_.config();
  params.validate();
  if (prompt.empty()) fail("the prompt is empty");
  validate_token_ids(prompt, c.vocab_size, "prompt");
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  if (total > options_.max_context)
    fail("prompt ({} tokens) plus max_tokens ({}) exceeds the context the caches hold ({})",
         prompt.size(), params.max_tokens, options_.max_context);

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  const int32_t slot = cache_.mamba.allocate();
  cache::BlockTable blocks;
  // Give the slot and blocks back however this ends.
  struct Release {
    cache::ModelCache& cache;
    cache::BlockTable& blocks;
    int32_t slot;
    ~Release() {
      blocks.release(cache.kv);
      cache.mamba.free(slot);
    }
  } release{cache_, blocks, slot};
  if (!blocks.ensure(cache_.kv, total)) fail("KV cache: no blocks for {} tokens", total);

  const bool need_kv = c.num_attention > 0;
  const int64_t block_size = cache_.kv.block_size();
  auto run_step = [&](std::vector<int32_t> tokens, int64_t computed) {
    model::SequenceChunk chunk;
    chunk.slot = slot;
    chunk.num_computed = computed;
    chunk.tokens = std::move(tokens);
    chunk.blocks = &blocks;
    const model::StepInput step =
        model::StepInput::build({chunk}, block_size, need_kv, ctx_.device, ctx_);
    return model_.forward(ctx_, step, cache_, model::LogitRows::LastPerSequence);  // [1, V] f32
  };
  auto sample = [&](const Tensor& logits, uint64_t index) {
    ops::SampleArgs s;
    s.logits = logits;
    s.rows = {params.row(index)};
    s.ids = Tensor::empty(Shape{1}, DType::I32, ctx_.device);
    ops::run(ctx_, s);
    if (ctx_.device == Device::Host) return s.ids.data<int32_t>()[0];
    ++ctx_.d2h_copies;
    return s.ids.to(Device::Host).data<int32_t>()[0];
  };

  auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : n;
  Tensor logits;
  for (int64_t done = 0; done < n; done += chunk) {
    const int64_t len = std::min(chunk, n - done);
    logits =
        run_step(std::vector<int32_t>(prompt.begin() + done, prompt.begin() + done + len), done);
  }
  result.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  int64_t computed = n;
  for (int64_t i = 0; i < params.max_tokens; ++i) {
    const int32_t id = sample(logits, static_cast<uint64_t>(i));
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
    logits = run_step({id}, computed);
    ++computed;
  }
  if (result.finish_reason.empty()) result.finish_reason = "length";
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace strata::engine
