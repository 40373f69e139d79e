#include "server/reasoning_parser.h"

#include <algorithm>

namespace strata::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kNames[] = {"nano_v3",     "nemotron",    "nemotron_nano_v2",
                                       "nemotron_v3", "deepseek_r1", "qwen3"};

// The longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len)
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

void add(ReasoningSplit& out, std::string_view reasoning, std::string_view content) {
  if (!reasoning.empty()) {
    out.reasoning.append(reasoning);
    out.has_reasoning = true;
  }
  if (!content.empty()) {
    out.content.append(content);
    out.has_content = true;
  }
}

}  // namespace

bool ReasoningParser::known(std::string_view name) {
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

std::unique_ptr<ReasoningParser> ReasoningParser::create(std::string_view name,
                                                         bool thinking_enabled) {
  if (!known(name)) return nullptr;
  return std::make_unique<ReasoningParser>(thinking_enabled);
}

ReasoningParser::ReasoningParser(bool thinking_enabled)
    : thinking_enabled_(thinking_enabled), in_reasoning_(thinking_enabled) {}

ReasoningSplit ReasoningParser::split(std::string_view text) const {
  ReasoningSplit out;
  if (!thinking_enabled_) {  // the prompt closed the think block: all of it is content
    add(out, {}, text);
    return out;
  }
  if (text.starts_with(kOpen)) text.remove_prefix(kOpen.size());
  const size_t close = text.find(kClose);
  if (close == std::string_view::npos) {  // still thinking when it stopped
    add(out, text, {});
    return out;
  }
  add(out, text.substr(0, close), text.substr(close + kClose.size()));
  return out;
}

ReasoningSplit ReasoningParser::push(std::string_view delta) {
  held_.append(delta);
  return emit(held_, /*final=*/false);
}

ReasoningSplit ReasoningParser::finish() {
  return emit(held_, /*final=*/true);
}

ReasoningSplit ReasoningParser::emit(std::string_view text, bool final) {
  ReasoningSplit out;
  std::string rest(text);
  held_.clear();
  if (in_reasoning_ && at_start_) {
    // A leading "<think>" is dropped; a partial one waits.
    if (rest.starts_with(kOpen)) {
      rest.erase(0, kOpen.size());
    } else if (!final && !rest.empty() && kOpen.starts_with(rest)) {
      held_ = rest;
      return out;
    }
  }
  if (!rest.empty()) at_start_ = false;
  if (!in_reasoning_) {
    add(out, {}, rest);
    return out;
  }
  const size_t close = rest.find(kClose);
  if (close != std::string::npos) {
    in_reasoning_ = false;
    add(out, std::string_view(rest).substr(0, close),
        std::string_view(rest).substr(close + kClose.size()));
    return out;
  }
  const size_t keep = final ? 0 : partial_suffix(rest, kClose);
  add(out, std::string_view(rest).substr(0, rest.size() - keep), {});
  held_ = rest.substr(rest.size() - keep);
  return out;
}

}  // namespace strata::server
