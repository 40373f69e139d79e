// Splitting a chat completion's text into reasoning and content, as vLLM's deepseek_r1-style
// parsers do for Nemotron (`--reasoning-parser nano_v3` / `deepseek_r1` / `nemotron`):
// the Nemotron templates end the generation prompt with "<think>\n" (thinking on) or
// "<think></think>" (thinking off), so the model's output is "reasoning</think>content" or just
// content. With thinking on, everything before "</think>" is reasoning (a leading "<think>" is
// dropped) and the text after it is content; without "</think>" all of it is reasoning (the
// model ran out of tokens while thinking). With thinking off (chat_template_kwargs
// enable_thinking=false), text without "</think>" is content (nano_v3's swap).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace strata::server {

struct ReasoningSplit {
  std::string reasoning;  // empty with has_reasoning false: the field is null / absent
  std::string content;
  bool has_reasoning = false;
  bool has_content = false;
};

class ReasoningParser {
 public:
  // Knows "nano_v3", "nemotron", "nemotron_nano_v2", "deepseek_r1" and "qwen3" (all the same
  // <think> format). Returns null for an unknown name (the server refuses it at start-up).
  static std::unique_ptr<ReasoningParser> create(std::string_view name, bool thinking_enabled);
  static bool known(std::string_view name);

  explicit ReasoningParser(bool thinking_enabled);

  // The whole output at once (non-streaming).
  ReasoningSplit split(std::string_view text) const;
  // Streaming: one text delta in, reasoning / content deltas out. A tail that may be the start
  // of "<think>" or "</think>" is held back until the next delta (or finish()).
  ReasoningSplit push(std::string_view delta);
  ReasoningSplit finish();
  bool in_reasoning() const { return in_reasoning_; }

 private:
  ReasoningSplit emit(std::string_view text, bool final);
  bool thinking_enabled_;
  bool in_reasoning_;
  bool at_start_ = true;  // nothing emitted yet (a leading "<think>" is still dropped)
  std::string held_;
};

}  // namespace strata::server
