// An OpenAI-style chat request as `strata chat-template` reads it: JSON text -> the arguments
// a chat template renders. Kept apart from the command so the request fuzzer
// (tests/fuzz/fuzz_chat_request.cpp) runs exactly this path.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace strata::cli {

struct ChatRequest {
  nlohmann::ordered_json messages;  // as sent, tool-call argument strings parsed unless kept
  nlohmann::ordered_json tools;     // null when absent
  nlohmann::ordered_json kwargs;    // chat_template_kwargs (+ "documents"), null when absent
  bool add_generation_prompt = true;
};

// Parses the request strictly (bounded nesting, duplicate keys refused, UTF-8 checked); throws
// strata::Error naming the field at fault.
ChatRequest parse_chat_request(std::string_view json_text, bool keep_argument_strings);

}  // namespace strata::cli
