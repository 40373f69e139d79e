// The OpenAI request side, transport-independent: /v1/completions and /v1/chat/completions
// bodies parsed and validated into engine requests plus a response plan (what the response
// builder needs to answer: model name, streaming, usage, logprobs shapes, tool and reasoning
// parsing). Parameters, defaults and 400s follow vLLM (spec/serving.md section 1.2,
// reliability.md section 1): unknown fields are ignored, every invalid parameter is an ApiError
// naming it, and nothing here throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/openai_errors.h"
#include "text/generation_config.h"

namespace strata::text {
class Tokenizer;
class ChatPromptBuilder;
}  // namespace strata::text

namespace strata::server {

// What the server knows about the model it serves (set once at start-up, read-only after).
struct ServingContext {
  std::string served_model_name;           // what /v1/models lists and responses echo
  std::vector<std::string> model_aliases;  // other accepted names (the --model path)
  std::string model_root;                  // ModelCard.root (the --model path, or the preset)
  int64_t max_model_len = 0;
  int32_t vocab_size = 0;         // bounds token ids in prompts, logit_bias, stop ids
  int32_t max_logprobs = 20;      // vLLM's --max-logprobs default
  int32_t max_n = 128;            // n (and prompts x n) above this is a 400
  size_t max_stop_strings = 256;  // stop strings per request; each <= max_stop_bytes
  size_t max_stop_bytes = 1024;
  size_t max_logit_bias = 4096;                   // logit_bias entries per request
  const text::Tokenizer* tokenizer = nullptr;     // null: --skip-tokenizer-init (ids only)
  const text::ChatPromptBuilder* chat = nullptr;  // null: no chat template (chat -> 400)
  // Sampling defaults from generation_config.json (--generation-config auto); a default-built
  // config (all unset) is --generation-config vllm.
  text::GenerationConfig generation_defaults;
  // Tools and reasoning (--enable-auto-tool-choice, --tool-call-parser, --reasoning-parser).
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // "" or a name tool_parser.h knows
  std::string reasoning_parser;  // "" or a name reasoning_parser.h knows
  // Which names the reasoning text is written under (spec/serving.md 1.3: both by default).
  bool emit_reasoning = true, emit_reasoning_content = true;
};

enum class Endpoint { Completions, ChatCompletions };
// Named and Required are guided: the output is constrained to JSON (text/json_schema_grammar.h).
enum class ToolChoice { None, Auto, Named, Required };

// Everything the response builder needs about one HTTP request.
struct ResponsePlan {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;       // "cmpl-..." / "chatcmpl-..." (the client's request_id when given)
  int64_t created = 0;  // unix seconds
  std::string model;    // the name responses carry
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats
  int32_t n = 1;
  // Completions: `logprobs` (top alternatives, >= 0) or -1. Chat: `top_logprobs` when
  // `logprobs` is true (0 when not given), else -1.
  int32_t logprobs = -1;
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;  // logprob tokens written "token_id:N"
  bool detokenize = true;  // false without a tokenizer: choices carry ids, text stays empty
  // One engine request per prompt (completions accept a batch), in prompt order; choice
  // index = prompt index * n + completion index.
  std::vector<std::string> request_ids;
  std::vector<std::vector<int32_t>> prompt_ids;
  // Chat only.
  std::string reasoning_parser;  // "" = no reasoning split
  bool thinking_enabled = true;  // chat_template_kwargs.enable_thinking as rendered
  ToolChoice tool_choice = ToolChoice::None;
  std::string tool_call_parser;  // with ToolChoice::Auto
  nlohmann::ordered_json tools;  // the request's tools (qwen3_coder types values by them)
  std::string tool_name;         // with ToolChoice::Named: the function
  bool emit_reasoning = true, emit_reasoning_content = true;
};

struct ParsedRequest {
  std::vector<engine::EngineRequest> requests;  // ids = plan.request_ids
  ResponsePlan plan;
};
using ParseResult = std::variant<ParsedRequest, ApiError>;

// Parses a request body (JSON object, nesting at most kMaxJsonDepth) into engine requests.
// `header_request_id`: the X-Request-Id header, if any (a body request_id wins).
ParseResult parse_completion_request(std::string_view body, const ServingContext& ctx,
                                     std::string_view header_request_id = {});
ParseResult parse_chat_request(std::string_view body, const ServingContext& ctx,
                               std::string_view header_request_id = {});

// JSON parsing with a nesting limit; invalid JSON, invalid UTF-8 and lone surrogates are 400s.
constexpr int kMaxJsonDepth = 64;
std::variant<nlohmann::ordered_json, ApiError> parse_json_body(std::string_view body,
                                                               int max_depth = kMaxJsonDepth);

// 404 unless `model` (absent / null is accepted) names the served model or an alias.
std::optional<ApiError> check_model(const nlohmann::ordered_json& request,
                                    const ServingContext& ctx);

// Start-up check of the serving flags: unknown --tool-call-parser / --reasoning-parser names,
// --enable-auto-tool-choice without a parser, a missing max_model_len or vocab size. Returns
// the message to exit with, or nullopt when the context is usable.
std::optional<std::string> check_serving_context(const ServingContext& ctx);

// A fresh id: prefix + 32 hex digits (random, unique within the process).
std::string random_id(std::string_view prefix);

}  // namespace strata::server
