// libFuzzer target: arbitrary bytes as a chat template, parsed and rendered on a fixed
// conversation (tools, tool calls, reasoning, unicode) under tight sandbox limits. Any failure
// must be a strata::Error (jinja::TemplateError); a crash, a sanitizer report, a hang or another
// exception type is a bug. Seeds: tests/fuzz/corpus/chat_template/ (the real templates).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "text/chat_template.h"

namespace {

const nlohmann::ordered_json& messages() {
  static const auto m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief. /no_think"},
    {"role": "user", "content": "Weather in Zürich? 🌦"},
    {"role": "assistant", "content": "<think>check</think>", "reasoning_content": "Call it.",
     "tool_calls": [{"id": "abcdefghi", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2.5, null]}}}]},
    {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"t\": 21.5}"},
    {"role": "user", "content": ""}])");
  return m;
}

const nlohmann::ordered_json& tools() {
  static const auto t = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "description": "Weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "enum": ["a", "b"]}}, "required": ["city"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_alloc_bytes = 64u << 20;
  try {
    const strata::ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size), limits);
    for (const bool thinking : {true, false}) {
      t.render(messages(), tools(), thinking, nlohmann::ordered_json{{"enable_thinking", thinking}},
               "<s>", "</s>");
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
