// Log-probabilities in OpenAI's shapes (internal to the response builder).
// Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}, the
// top list being the `top_logprobs` most likely tokens. Completions: {tokens, token_logprobs,
// top_logprobs: [{token: logprob}], text_offset}, each top dict holding the chosen token and
// the `logprobs` most likely ones (OpenAI's legacy shape, as vLLM fills it). Token strings are
// the single-token decode (a lone byte of a longer character shows as U+FFFD, as in vLLM);
// without a tokenizer they are "token_id:N". Logprobs below -9999 (and -inf) read -9999.0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace strata::text {
class Tokenizer;
}

namespace strata::server {

class LogprobFormatter {
 public:
  LogprobFormatter() = default;
  // `as_ids` (return_tokens_as_token_ids): tokens are written "token_id:N" even with a tokenizer.
  explicit LogprobFormatter(const text::Tokenizer* tokenizer, bool as_ids = false)
      : tokenizer_(as_ids ? nullptr : tokenizer) {}

  std::string token_text(int32_t id) const;
  nlohmann::ordered_json chat(const std::vector<engine::TokenLogprobs>& tokens, int32_t top) const;
  // `text_offset`: code points of text before the first token; advanced past these tokens.
  nlohmann::ordered_json completion(const std::vector<engine::TokenLogprobs>& tokens, int32_t top,
                                    int64_t* text_offset) const;

 private:
  const text::Tokenizer* tokenizer_ = nullptr;
};

}  // namespace strata::server
