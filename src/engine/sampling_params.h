// Per-request sampling parameters with vLLM's names and meanings (vllm.SamplingParams), and
// their validation. The server and `strata generate --prompts-file` parse into this; the
// engine turns it into one sampler row per step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops.h"

namespace strata::text {
class JsonSchemaGrammar;  // text/json_schema_grammar.h
}

namespace strata::engine {

struct SamplingParams {
  int32_t n = 1;            // completions per prompt (children share the prompt's state)
  float temperature = 1.f;  // 0 = greedy
  int32_t top_k = 0;        // 0 (or -1 in requests) = off
  float top_p = 1.f;        // 1 = off
  float min_p = 0.f;        // 0 = off
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  float repetition_penalty = 1.f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias added to its logit
  std::optional<uint64_t> seed;  // none: the engine draws one at admission
  int64_t max_tokens = 16;
  int64_t min_tokens = 0;  // stop ids and EOS are masked until this many tokens exist
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // extra stop ids (EOS ids come from the model)
  std::vector<std::string> stop;        // stop strings (matched on the detokenized text)
  bool include_stop_str_in_output = false;
  int32_t logprobs = -1;         // -1: none; k >= 0: the sampled token's plus the top k
  int32_t prompt_logprobs = -1;  // refused for now (validate says so)
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  bool detokenize = true;  // false: token ids only (--skip-tokenizer-init)
  // Guided decoding: the output is constrained to one JSON value of this schema (vLLM's
  // tool_choice "required" and named functions). Needs a tokenizer and an EOS id; EOS is
  // allowed only once the value is complete.
  std::shared_ptr<const text::JsonSchemaGrammar> guided_json;

  // Throws strata::Error naming the parameter and its range when out of range.
  // `vocab_size` bounds logit_bias and stop_token_ids; `max_logprobs` bounds logprobs.
  void validate(int64_t vocab_size = INT32_MAX, int32_t max_logprobs = 20) const;
  // The sample op's row for the token at index `step` of the generation (seed resolved).
  ops::SamplingRow row(uint64_t seed_value, uint64_t step) const;
  bool greedy() const { return temperature == 0.f; }
  // Penalties need every token of the sequence on the host when its row is built.
  bool penalized() const {
    return presence_penalty != 0.f || frequency_penalty != 0.f || repetition_penalty != 1.f;
  }
  // Rows that need their previous token on the host when they are built (the engine does not
  // overlap steps while such a request is live): penalties, and guided decoding's mask.
  bool needs_host_tokens() const { return penalized() || guided_json != nullptr; }
};

}  // namespace strata::engine
