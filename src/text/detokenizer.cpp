#include "text/detokenizer.h"

namespace strata::text {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  const std::string* token = tokenizer_.token_string(id);
  if (!token || (skip_special_tokens_ && tokenizer_.is_special(id))) return {};
  window_.push_back(*token);
  std::string text =
      tokenizer_.decode_strings(window_, DecodePosition{at_start_, /*at_end=*/false});
  if (tokenizer_.decode_holds_back(HoldQuery{window_, text, at_start_})) return {};
  window_.clear();
  at_start_ = false;
  return text;
}

std::string IncrementalDetokenizer::finish() {
  std::string text;
  if (!window_.empty())
    text = tokenizer_.decode_strings(window_, DecodePosition{at_start_, /*at_end=*/true});
  window_.clear();
  at_start_ = true;
  return text;
}

}  // namespace strata::text
