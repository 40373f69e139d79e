#include "server/openai_logprobs.h"

#include <algorithm>
#include <cmath>

#include "text/tokenizer.h"

namespace strata::server {

using json = nlohmann::ordered_json;

namespace {

double clamp_logprob(float lp) {
  if (std::isnan(lp)) return -9999.0;
  return std::max(static_cast<double>(lp), -9999.0);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s)
    b.push_back(static_cast<int>(c));
  return b;
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string LogprobFormatter::token_text(int32_t id) const {
  if (!tokenizer_) return "token_id:" + std::to_string(id);
  const int32_t one[1] = {id};
  return tokenizer_->decode(std::span<const int32_t>(one, 1), /*skip_special_tokens=*/false);
}

json LogprobFormatter::chat(const std::vector<engine::TokenLogprobs>& tokens, int32_t top) const {
  json content = json::array();
  for (const engine::TokenLogprobs& t : tokens) {
    const std::string text = token_text(t.token);
    json entry = json::object();
    entry["token"] = text;
    entry["logprob"] = clamp_logprob(t.logprob);
    entry["bytes"] = bytes_of(text);
    json alts = json::array();
    const size_t k = std::min(t.top.size(), static_cast<size_t>(std::max(top, 0)));
    for (size_t i = 0; i < k; ++i) {
      const std::string alt = token_text(t.top[i].first);
      alts.push_back(
          {{"token", alt}, {"logprob", clamp_logprob(t.top[i].second)}, {"bytes", bytes_of(alt)}});
    }
    entry["top_logprobs"] = std::move(alts);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

json LogprobFormatter::completion(const std::vector<engine::TokenLogprobs>& tokens, int32_t top,
                                  int64_t* text_offset) const {
  json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const engine::TokenLogprobs& t : tokens) {
    const std::string text = token_text(t.token);
    texts.push_back(text);
    lps.push_back(clamp_logprob(t.logprob));
    json dict = json::object();
    dict[text] = clamp_logprob(t.logprob);  // the chosen token first
    const size_t k = std::min(t.top.size(), static_cast<size_t>(std::max(top, 0)));
    for (size_t i = 0; i < k; ++i) {
      const std::string alt = token_text(t.top[i].first);
      if (!dict.contains(alt)) dict[alt] = clamp_logprob(t.top[i].second);
    }
    tops.push_back(std::move(dict));
    offsets.push_back(*text_offset);
    *text_offset += code_points(text);
  }
  return {{"text_offset", std::move(offsets)},
          {"token_logprobs", std::move(lps)},
          {"tokens", std::move(texts)},
          {"top_logprobs", std::move(tops)}};
}

}  // namespace strata::server
