#include "server/openai_response.h"

#include <algorithm>
#include <cmath>

#include "server/guided_tool_calls.h"
#include "server/openai_logprobs.h"
#include "server/reasoning_parser.h"
#include "server/tool_parser.h"
#include "text/tokenizer.h"

namespace strata::server {

using json = nlohmann::ordered_json;
using engine::FinishReason;

namespace {

json finish_json(FinishReason r) {
  const char* name = engine::finish_reason_name(r);
  return name ? json(name) : json(nullptr);
}

// Streamed pieces of guided tool calls (vLLM: the name in a call's first delta, then pieces
// of its arguments).
json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas) {
  json out = json::array();
  for (const ToolCallDelta& d : deltas) {
    json c = json::object();
    c["index"] = d.index;
    if (d.header) {
      c["id"] = d.header->id;
      c["type"] = "function";
      c["function"] = {{"name", d.header->name}, {"arguments", d.arguments}};
    } else {
      c["function"] = {{"arguments", d.arguments}};
    }
    out.push_back(std::move(c));
  }
  return out;
}

json tool_calls_json(const std::vector<ToolCall>& calls, int32_t first_index, bool streaming) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = json::object();
    if (streaming) c["index"] = first_index + static_cast<int32_t>(i);
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

}  // namespace

struct ChoiceState {
  int32_t index = 0;
  std::string text;  // all final text (completions: streamed as is; chat: parsed at the end)
  std::vector<int32_t> token_ids;
  std::vector<engine::TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::None;
  std::string stop_reason;
  std::optional<int32_t> stop_token_id;
  bool done = false;
  int64_t text_offset = 0;  // completions logprobs: code points so far
  // Chat streaming.
  std::unique_ptr<ReasoningParser> reasoning;
  std::unique_ptr<ToolParser> tools;
  std::unique_ptr<GuidedToolCalls> guided;  // tool_choice named / "required"
  bool tool_calls_sent = false;
};

struct PromptState {
  bool started = false;  // some output arrived (the chat role chunk went out)
  bool finished = false;
  int64_t prompt_tokens = 0;
};

struct ResponseBuilder::Impl {
  ResponsePlan plan;
  const ServingContext* ctx;
  std::vector<ChoiceState> choices;  // prompt-major: prompt * n + completion
  std::vector<PromptState> prompts;
  std::optional<ApiError> error;
  LogprobFormatter logprob_fmt;

  bool chat() const { return plan.endpoint == Endpoint::ChatCompletions; }

  json header(const char* object) const {
    json j = json::object();
    j["id"] = plan.id;
    j["object"] = object;
    j["created"] = plan.created;
    j["model"] = plan.model;
    return j;
  }

  json usage() const {
    int64_t prompt = 0, completion = 0;
    for (const PromptState& p : prompts)
      prompt += p.prompt_tokens;
    for (const ChoiceState& c : choices)
      completion += static_cast<int64_t>(c.token_ids.size());
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  }

  json stop_reason_json(const ChoiceState& c) const {
    if (c.stop_token_id) return *c.stop_token_id;
    if (!c.stop_reason.empty()) return c.stop_reason;
    return nullptr;
  }

  // A choice's content split into reasoning / content / tool calls (non-streaming).
  struct ChatParts {
    std::optional<std::string> reasoning;
    std::optional<std::string> content;
    std::vector<ToolCall> calls;
  };
  ChatParts chat_parts(const ChoiceState& c) const {
    ChatParts parts;
    std::string content = c.text;
    bool has_content = true;
    if (!plan.reasoning_parser.empty()) {
      const ReasoningParser parser(plan.thinking_enabled);
      ReasoningSplit s = parser.split(c.text);
      if (s.has_reasoning) parts.reasoning = std::move(s.reasoning);
      content = std::move(s.content);
      has_content = s.has_content;
    }
    if (guided()) {
      // The whole output is the grammar's JSON: tool calls only, content "" (vLLM).
      parts.calls = GuidedToolCalls::parse(named(), content);
      parts.content = "";
      return parts;
    }
    if (plan.tool_choice == ToolChoice::Auto && has_content) {
      auto tp = ToolParser::create(plan.tool_call_parser, plan.tools);
      if (tp) {
        ToolParseResult r = tp->parse(content);
        parts.calls = std::move(r.calls);
        content = std::move(r.content);
        if (!parts.calls.empty() && blank(content)) has_content = false;
      }
    }
    if (has_content) parts.content = std::move(content);
    return parts;
  }

  bool guided() const {
    return plan.tool_choice == ToolChoice::Named || plan.tool_choice == ToolChoice::Required;
  }
  std::optional<std::string> named() const {
    if (plan.tool_choice == ToolChoice::Named) return plan.tool_name;
    return std::nullopt;
  }
  // vLLM: "tool_calls" for auto and "required" calls that ended normally; a named call keeps
  // the output's own reason ("stop").
  json finish_with_calls(FinishReason r, bool calls) const {
    if (calls && r == FinishReason::Stop && plan.tool_choice != ToolChoice::Named)
      return "tool_calls";
    return finish_json(r);
  }

  void put_reasoning(json& msg, const std::optional<std::string>& reasoning) const {
    if (!plan.emit_reasoning && !plan.emit_reasoning_content) return;
    const json v = reasoning ? json(*reasoning) : json(nullptr);
    if (plan.emit_reasoning) msg["reasoning"] = v;
    if (plan.emit_reasoning_content) msg["reasoning_content"] = v;
  }

  // --- streaming ---
  json chunk_base() const { return header(chat() ? "chat.completion.chunk" : "text_completion"); }

  std::string event(json choice_list) {
    json j = chunk_base();
    j["choices"] = std::move(choice_list);
    if (plan.continuous_usage_stats) j["usage"] = usage();
    return sse_event(j);
  }

  std::vector<std::string> stream_delta(size_t prompt_index, const engine::CompletionDelta& d,
                                        ChoiceState& c, bool first_of_prompt) {
    std::vector<std::string> events;
    const bool finishing = d.finish != FinishReason::None;
    json choice = json::object();
    choice["index"] = c.index;
    if (chat()) {
      json delta = json::object();
      std::string content = d.text;
      bool has_content = !content.empty();
      if (c.reasoning) {
        ReasoningSplit s = c.reasoning->push(d.text);
        if (finishing) {
          ReasoningSplit rest = c.reasoning->finish();
          s.reasoning += rest.reasoning;
          s.content += rest.content;
          s.has_reasoning |= rest.has_reasoning;
          s.has_content |= rest.has_content;
        }
        if (s.has_reasoning && (plan.emit_reasoning || plan.emit_reasoning_content)) {
          if (plan.emit_reasoning) delta["reasoning"] = s.reasoning;
          if (plan.emit_reasoning_content) delta["reasoning_content"] = s.reasoning;
        }
        content = std::move(s.content);
        has_content = s.has_content;
      }
      if (c.guided) {
        std::vector<ToolCallDelta> t = c.guided->push(content);
        content.clear();
        has_content = false;
        if (!t.empty()) {
          delta["tool_calls"] = tool_call_deltas_json(t);
          c.tool_calls_sent = true;
        }
      }
      if (c.tools) {
        ToolStreamDelta t = c.tools->push(content);
        if (finishing) {
          ToolStreamDelta rest = c.tools->finish();
          t.content += rest.content;
          for (ToolCall& call : rest.calls)
            t.calls.push_back(std::move(call));
          for (ToolCallDelta& piece : rest.pieces)
            t.pieces.push_back(std::move(piece));
        }
        content = std::move(t.content);
        has_content = !content.empty();
        if (!t.calls.empty() || !t.pieces.empty()) {
          json calls = tool_calls_json(t.calls, t.first_index, /*streaming=*/true);
          for (json& piece : tool_call_deltas_json(t.pieces)) calls.push_back(std::move(piece));
          delta["tool_calls"] = std::move(calls);
          c.tool_calls_sent = true;
        }
      }
      if (has_content) delta["content"] = content;
      const bool has_logprobs = plan.logprobs >= 0 && !d.logprobs.empty();
      if (delta.empty() && !finishing && !has_logprobs) return events;
      choice["delta"] = std::move(delta);
      choice["logprobs"] =
          has_logprobs ? logprob_fmt.chat(d.logprobs, plan.logprobs) : json(nullptr);
    } else {
      choice["text"] = d.text;
      choice["logprobs"] = plan.logprobs >= 0 && !d.logprobs.empty()
                               ? logprob_fmt.completion(d.logprobs, plan.logprobs, &c.text_offset)
                               : json(nullptr);
    }
    choice["finish_reason"] = nullptr;
    if (finishing) {
      choice["finish_reason"] = finish_with_calls(d.finish, c.tool_calls_sent);
      choice["stop_reason"] = stop_reason_json(c);
    }
    if (plan.return_token_ids || !plan.detokenize) {
      choice["token_ids"] = d.token_ids;
      if (first_of_prompt && !chat()) choice["prompt_token_ids"] = plan.prompt_ids[prompt_index];
    }
    events.push_back(event(json::array({std::move(choice)})));
    return events;
  }

  std::vector<std::string> role_chunks(size_t prompt_index) {
    std::vector<std::string> events;
    for (int32_t k = 0; k < plan.n; ++k) {
      json choice = json::object();
      choice["index"] = static_cast<int32_t>(prompt_index) * plan.n + k;
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = nullptr;
      json j = chunk_base();
      j["choices"] = json::array({std::move(choice)});
      if (plan.return_token_ids || !plan.detokenize)
        j["prompt_token_ids"] = plan.prompt_ids[prompt_index];
      if (plan.continuous_usage_stats) j["usage"] = usage();
      events.push_back(sse_event(j));
    }
    return events;
  }
};

ResponseBuilder::ResponseBuilder(ResponsePlan plan, const ServingContext& ctx)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.plan = std::move(plan);
  s.ctx = &ctx;
  s.logprob_fmt = LogprobFormatter(ctx.tokenizer, s.plan.return_tokens_as_token_ids);
  s.prompts.resize(s.plan.request_ids.size());
  const size_t total = s.plan.request_ids.size() * static_cast<size_t>(s.plan.n);
  s.choices.resize(total);
  for (size_t i = 0; i < total; ++i) {
    ChoiceState& c = s.choices[i];
    c.index = static_cast<int32_t>(i);
    if (s.plan.stream && s.chat()) {
      if (!s.plan.reasoning_parser.empty())
        c.reasoning = ReasoningParser::create(s.plan.reasoning_parser, s.plan.thinking_enabled);
      if (s.plan.tool_choice == ToolChoice::Auto)
        c.tools = ToolParser::create(s.plan.tool_call_parser, s.plan.tools);
      if (s.guided()) c.guided = std::make_unique<GuidedToolCalls>(s.named());
    }
  }
}

ResponseBuilder::~ResponseBuilder() = default;
ResponseBuilder::ResponseBuilder(ResponseBuilder&&) noexcept = default;

const ResponsePlan& ResponseBuilder::plan() const {
  return impl_->plan;
}
const std::optional<ApiError>& ResponseBuilder::error() const {
  return impl_->error;
}

bool ResponseBuilder::finished() const {
  if (impl_->error) return true;
  return std::all_of(impl_->prompts.begin(), impl_->prompts.end(),
                     [](const PromptState& p) { return p.finished; });
}

std::vector<std::string> ResponseBuilder::on_output(const engine::RequestOutput& output) {
  Impl& s = *impl_;
  std::vector<std::string> events;
  const auto it =
      std::find(s.plan.request_ids.begin(), s.plan.request_ids.end(), output.request_id);
  if (it == s.plan.request_ids.end()) return events;  // not ours
  const size_t p = static_cast<size_t>(it - s.plan.request_ids.begin());
  PromptState& prompt = s.prompts[p];
  prompt.prompt_tokens = output.prompt_tokens;
  bool any_finish_error = false;
  for (const engine::CompletionDelta& d : output.completions)
    if (d.finish == FinishReason::Error) any_finish_error = true;
  if (any_finish_error || !output.error.empty()) {
    s.error =
        internal_error(output.error.empty() ? "the engine failed while generating" : output.error);
    prompt.finished = true;
    return events;
  }
  const bool has_tokens = std::any_of(
      output.completions.begin(), output.completions.end(), [](const engine::CompletionDelta& d) {
        return !d.token_ids.empty() || d.finish != FinishReason::None;
      });
  bool first_of_prompt = false;
  if (has_tokens && !prompt.started) {
    prompt.started = true;
    first_of_prompt = true;
    if (s.plan.stream && s.chat()) events = s.role_chunks(p);
  }
  for (const engine::CompletionDelta& d : output.completions) {
    if (d.index < 0 || d.index >= s.plan.n) continue;
    ChoiceState& c = s.choices[p * static_cast<size_t>(s.plan.n) + static_cast<size_t>(d.index)];
    if (c.done) continue;
    if (d.token_ids.empty() && d.text.empty() && d.finish == FinishReason::None) continue;
    if (s.plan.stream) {
      auto more = s.stream_delta(p, d, c, first_of_prompt);
      events.insert(events.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
    }
    c.text += d.text;
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    if (!s.plan.stream && s.plan.logprobs >= 0)
      c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish != FinishReason::None) {
      c.finish = d.finish;
      c.stop_reason = d.stop_reason;
      c.stop_token_id = d.stop_token_id;
      c.done = true;
    }
  }
  if (output.finished) {
    prompt.finished = true;
    // Completions the engine ended without a delta (abort) still owe a finish.
    for (int32_t k = 0; k < s.plan.n; ++k) {
      ChoiceState& c = s.choices[p * static_cast<size_t>(s.plan.n) + static_cast<size_t>(k)];
      if (c.done) continue;
      engine::CompletionDelta d;
      d.index = k;
      d.finish = FinishReason::Abort;
      if (s.plan.stream) {
        if (!prompt.started && s.chat()) {
          prompt.started = true;
          auto roles = s.role_chunks(p);
          events.insert(events.end(), roles.begin(), roles.end());
        }
        auto more = s.stream_delta(p, d, c, false);
        events.insert(events.end(), more.begin(), more.end());
      }
      c.finish = FinishReason::Abort;
      c.done = true;
    }
  }
  return events;
}

std::vector<std::string> ResponseBuilder::stream_end() {
  std::vector<std::string> events;
  Impl& s = *impl_;
  if (s.error) return stream_error_events(*s.error);
  if (s.plan.include_usage) {
    json j = s.chunk_base();
    j["choices"] = json::array();
    j["usage"] = s.usage();
    events.push_back(sse_event(j));
  }
  events.push_back(kSseDone);
  return events;
}

json ResponseBuilder::body() const {
  const Impl& s = *impl_;
  if (s.error) return json(s.error->body());
  json j = s.header(s.chat() ? "chat.completion" : "text_completion");
  json choices = json::array();
  for (const ChoiceState& c : s.choices) {
    const size_t p = static_cast<size_t>(c.index / s.plan.n);
    json choice = json::object();
    choice["index"] = c.index;
    json finish = finish_json(c.finish == FinishReason::None ? FinishReason::Abort : c.finish);
    if (s.chat()) {
      Impl::ChatParts parts = s.chat_parts(c);
      json msg = json::object();
      msg["role"] = "assistant";
      msg["content"] = parts.content ? json(*parts.content) : json(nullptr);
      s.put_reasoning(msg, parts.reasoning);
      msg["tool_calls"] = tool_calls_json(parts.calls, 0, /*streaming=*/false);
      if (!parts.calls.empty()) finish = s.finish_with_calls(c.finish, true);
      choice["message"] = std::move(msg);
      choice["logprobs"] =
          s.plan.logprobs >= 0 ? s.logprob_fmt.chat(c.logprobs, s.plan.logprobs) : json(nullptr);
    } else {
      choice["text"] = c.text;
      int64_t offset = 0;
      choice["logprobs"] = s.plan.logprobs >= 0
                               ? s.logprob_fmt.completion(c.logprobs, s.plan.logprobs, &offset)
                               : json(nullptr);
    }
    choice["finish_reason"] = std::move(finish);
    choice["stop_reason"] = s.stop_reason_json(c);
    if (s.plan.return_token_ids || !s.plan.detokenize) {
      choice["token_ids"] = c.token_ids;
      if (!s.chat()) choice["prompt_token_ids"] = s.plan.prompt_ids[p];
    }
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  j["usage"] = s.usage();
  if (s.chat() && (s.plan.return_token_ids || !s.plan.detokenize) && !s.plan.prompt_ids.empty())
    j["prompt_token_ids"] = s.plan.prompt_ids[0];
  return j;
}

std::string sse_event(const json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

std::vector<std::string> stream_error_events(const ApiError& error) {
  return {"data: " + error.body_text() + "\n\n", kSseDone};
}

}  // namespace strata::server
