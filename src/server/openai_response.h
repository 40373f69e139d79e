// The OpenAI response side, transport-independent: engine outputs in, response bodies out.
// One ResponseBuilder per HTTP request. Streaming yields complete SSE events
// ("data: {...}\n\n"): nothing before the first token exists, the chat role delta first, empty
// deltas suppressed, finish_reason / stop_reason on each choice's last chunk, then the usage
// chunk (choices: []) with stream_options.include_usage, then "data: [DONE]\n\n". Without
// streaming, the outputs are accumulated and body() gives the chat.completion / text_completion
// JSON. Logprobs in OpenAI's shapes per endpoint; reasoning split and tool calls for chat.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/openai_errors.h"
#include "server/openai_protocol.h"

namespace strata::server {

class ResponseBuilder {
 public:
  // `ctx` must outlive the builder (its tokenizer renders logprob tokens).
  ResponseBuilder(ResponsePlan plan, const ServingContext& ctx);
  ~ResponseBuilder();
  ResponseBuilder(ResponseBuilder&&) noexcept;

  // Takes one engine output of one of the plan's requests. Streaming: returns the SSE events
  // it produces (possibly none). Not streaming: accumulates and returns nothing.
  std::vector<std::string> on_output(const engine::RequestOutput& output);
  // Every engine request has finished (or the builder saw an error).
  bool finished() const;
  // Streaming, once finished: the usage chunk (when asked for) and the [DONE] event.
  std::vector<std::string> stream_end();
  // Not streaming, once finished: the response body.
  nlohmann::ordered_json body() const;
  // An engine error (FinishReason::Error) seen in any output: the 500 to answer with (or to
  // send as a stream error event).
  const std::optional<ApiError>& error() const;

  const ResponsePlan& plan() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "data: <json>\n\n".
std::string sse_event(const nlohmann::ordered_json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// An error after the 200 went out: the error event followed by [DONE] (as vLLM streams it).
std::vector<std::string> stream_error_events(const ApiError& error);

}  // namespace strata::server
