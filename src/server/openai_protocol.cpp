#include "server/openai_protocol.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "core/check.h"
#include "server/openai_fields.h"
#include "server/reasoning_parser.h"
#include "server/tool_parser.h"
#include "text/chat_request.h"
#include "text/json_schema_grammar.h"
#include "text/tokenizer.h"

namespace strata::server {

using detail::Fields;
using detail::ParamError;
using detail::reject;
using json = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxPrompts = 1024;  // prompts in one completions batch

// Nesting depth of a JSON text, counted outside strings; stops early past `limit`.
bool depth_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The response id: the client's request_id (body, then header) or a random one.
std::string response_id(const Fields& f, std::string_view header_request_id, const char* prefix) {
  auto rid = f.string("request_id");
  if (!rid && !header_request_id.empty()) rid = std::string(header_request_id);
  if (rid) {
    if (rid->empty() || rid->size() > 256)
      reject("request_id must be 1 to 256 characters", "request_id");
    return prefix + *rid;
  }
  return random_id(prefix);
}

json parse_object(std::string_view body) {
  auto parsed = parse_json_body(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) throw ParamError{*e};
  json j = std::move(std::get<json>(parsed));
  if (!j.is_object()) reject("the request body must be a JSON object");
  return j;
}

void finish_plan(ResponsePlan& plan, const Fields& f, const json& body, const ServingContext& ctx,
                 std::string_view model_fallback) {
  plan.created = now_seconds();
  const json* m = f.get("model");
  plan.model = m && m->is_string() ? m->get<std::string>() : std::string(model_fallback);
  plan.detokenize = ctx.tokenizer != nullptr;
}

// One engine request per prompt; ids unique among live requests even when clients reuse
// request_id.
std::vector<engine::EngineRequest> make_requests(ResponsePlan& plan,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 const engine::SamplingParams& params,
                                                 const std::vector<int64_t>& max_tokens) {
  std::vector<engine::EngineRequest> out;
  const std::string base = random_id("req-");
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest r;
    r.id = prompts.size() == 1 ? base : base + "-" + std::to_string(i);
    r.prompt = prompts[i];
    r.params = params;
    r.params.n = plan.n;
    r.params.max_tokens = max_tokens[i];
    plan.request_ids.push_back(r.id);
    plan.prompt_ids.push_back(prompts[i]);
    out.push_back(std::move(r));
  }
  return out;
}

// truncate_prompt_tokens: keep the last k ids (-1: max_model_len), as vLLM's left truncation.
void truncate_prompt(const Fields& f, const ServingContext& ctx, std::vector<int32_t>& ids) {
  auto k = f.integer("truncate_prompt_tokens", -1, std::numeric_limits<int64_t>::max());
  if (!k) return;
  if (*k == 0) reject("truncate_prompt_tokens must be -1 or at least 1", "truncate_prompt_tokens");
  const int64_t keep = *k == -1 ? ctx.max_model_len : *k;
  if (static_cast<int64_t>(ids.size()) > keep) ids.erase(ids.begin(), ids.end() - keep);
}

std::vector<int32_t> ids_of(const json& list, const char* param) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const json& x : list) {
    const auto i = detail::as_integer(x);
    if (!i) reject("prompt token ids must be integers", param);
    if (*i < 0 || *i > std::numeric_limits<int32_t>::max())
      reject(fmt::format("Token id {} is out of vocabulary", *i), param);
    ids.push_back(static_cast<int32_t>(*i));
  }
  return ids;
}

bool all_integers(const json& list) {
  for (const json& x : list)
    if (!x.is_number()) return false;
  return true;
}

std::vector<std::vector<int32_t>> completion_prompts(const Fields& f, const ServingContext& ctx) {
  const json* p = f.get("prompt");
  if (!p) reject("prompt is required", "prompt");
  const bool add_special = f.boolean("add_special_tokens").value_or(true);
  auto encode = [&](const json& s) {
    if (!ctx.tokenizer)
      reject(
          "a text prompt needs the tokenizer (the server runs with --skip-tokenizer-init): "
          "send token ids",
          "prompt");
    const std::string text = s.get<std::string>();
    if (text.empty()) reject("prompt must not be empty", "prompt");
    return ctx.tokenizer->encode(text, add_special);
  };
  std::vector<std::vector<int32_t>> prompts;
  if (p->is_string()) {
    prompts.push_back(encode(*p));
  } else if (p->is_array()) {
    if (p->empty()) reject("prompt must not be empty", "prompt");
    if (p->size() > kMaxPrompts)
      reject(fmt::format("a prompt batch may hold at most {} prompts", kMaxPrompts), "prompt");
    if (all_integers(*p)) {
      prompts.push_back(ids_of(*p, "prompt"));
    } else {
      for (const json& item : *p) {
        if (item.is_string()) {
          prompts.push_back(encode(item));
        } else if (item.is_array() && all_integers(item)) {
          if (item.empty()) reject("prompt must not be empty", "prompt");
          prompts.push_back(ids_of(item, "prompt"));
        } else {
          reject(
              "prompt must be a string, a list of strings, a list of token ids or a list of "
              "token-id lists",
              "prompt");
        }
      }
    }
  } else {
    reject(
        "prompt must be a string, a list of strings, a list of token ids or a list of "
        "token-id lists",
        "prompt");
  }
  for (auto& ids : prompts) {
    if (ids.empty()) reject("prompt must not be empty", "prompt");
    truncate_prompt(f, ctx, ids);
    detail::check_token_ids(ids, ctx, "prompt");
  }
  return prompts;
}

const char* const kRoles[] = {"system", "user", "assistant", "tool", "developer", "function"};

void check_messages(const json* messages) {
  if (!messages) reject("messages is required", "messages");
  if (!messages->is_array()) reject("messages must be a list of messages", "messages");
  if (messages->empty()) reject("messages must not be empty", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object()) reject(fmt::format("messages[{}] must be an object", i), "messages");
    if (!m.contains("role") || !m["role"].is_string())
      reject(fmt::format("messages[{}].role must be a string", i), "messages");
    const std::string role = m["role"].get<std::string>();
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles))
      reject(fmt::format("messages[{}].role \"{}\" is not one of system, user, assistant, tool, "
                         "developer",
                         i, role.substr(0, 32)),
             "messages");
  }
}

void check_tools(const json* tools) {
  if (!tools) return;
  if (!tools->is_array()) reject("tools must be a list of tool definitions", "tools");
  if (tools->empty()) reject("tools must not be an empty list (leave it out instead)", "tools");
  if (tools->size() > 1024) reject("tools may hold at most 1024 definitions", "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    if (!t.is_object()) reject(fmt::format("tools[{}] must be an object", i), "tools");
    if (t.contains("type") && t["type"] != "function")
      reject(fmt::format("tools[{}].type must be \"function\"", i), "tools");
    if (!t.contains("function") || !t["function"].is_object())
      reject(fmt::format("tools[{}].function must be an object", i), "tools");
    const json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      reject(fmt::format("tools[{}].function.name must be a non-empty string", i), "tools");
    if (fn.contains("description") && !fn["description"].is_null() &&
        !fn["description"].is_string())
      reject(fmt::format("tools[{}].function.description must be a string", i), "tools");
    if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
      reject(fmt::format("tools[{}].function.parameters must be a JSON schema object", i), "tools");
  }
}

// tool_choice as vLLM applies it: "none" by default, "auto" when tools are given; "auto" needs
// --enable-auto-tool-choice and a parser; "required" and a named function are guided decoding
// (need no parser): `*name` gets the named function.
ToolChoice tool_choice(const Fields& f, const json* tools, const ServingContext& ctx,
                       std::string* name) {
  const json* tc = f.get("tool_choice");
  if (tc && !tools && !(tc->is_string() && *tc == "none"))
    reject("When using `tool_choice`, `tools` must be set.", "tool_choice");
  std::string choice = tools ? "auto" : "none";
  if (tc) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        reject("tool_choice must be \"none\", \"auto\", \"required\" or a named function",
               "tool_choice");
    } else if (tc->is_object()) {
      const json* fn = tc->contains("function") ? &(*tc)["function"] : nullptr;
      if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        reject("a named tool_choice needs function.name", "tool_choice");
      bool found = false;
      for (const json& t : *tools)
        if (t["function"]["name"] == (*fn)["name"]) found = true;
      if (!found) reject("tool_choice names a function that is not in tools", "tool_choice");
      *name = (*fn)["name"].get<std::string>();
      return ToolChoice::Named;
    } else {
      reject("tool_choice must be a string or an object", "tool_choice");
    }
  }
  if (choice == "required") return ToolChoice::Required;
  if (choice == "auto") {
    if (!ctx.enable_auto_tool_choice || ctx.tool_call_parser.empty())
      reject(
          "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to "
          "be set",
          "tool_choice");
    return ToolChoice::Auto;
  }
  return ToolChoice::None;
}

// The schema guided decoding constrains a named or "required" tool choice to (vLLM's): the
// function's parameters, or an array of {"name", "parameters"} over every tool.
std::shared_ptr<const text::JsonSchemaGrammar> tool_grammar(ToolChoice choice,
                                                            const std::string& name,
                                                            const json& tools) {
  json schema;
  if (choice == ToolChoice::Required) {
    schema = text::JsonSchemaGrammar::required_tools_schema(tools);
  } else {
    schema = json{{"type", "object"}, {"properties", json::object()}};
    for (const json& t : tools)
      if (t["function"]["name"] == name && t["function"].contains("parameters") &&
          t["function"]["parameters"].is_object())
        schema = t["function"]["parameters"];
  }
  try {
    return std::make_shared<const text::JsonSchemaGrammar>(schema);
  } catch (const Error& e) {
    reject(fmt::format("the tool's parameters schema cannot guide decoding: {}", e.what()),
           "tools");
  }
}

// Whether the rendered prompt leaves the model inside <think>: the Nemotron templates end it
// with "<think>\n" (thinking on) or "<think></think>" (off). Other endings: the kwargs decide.
bool thinking_from_prompt(const std::string& prompt, bool kwargs_thinking) {
  size_t end = prompt.size();
  while (end > 0 && (prompt[end - 1] == '\n' || prompt[end - 1] == ' '))
    --end;
  const std::string_view p(prompt.data(), end);
  if (p.ends_with("</think>")) return false;
  if (p.ends_with("<think>")) return true;
  return kwargs_thinking;
}

ParsedRequest parse_chat(std::string_view body, const ServingContext& ctx,
                         std::string_view header_request_id) {
  const json j = parse_object(body);
  if (auto e = check_model(j, ctx)) throw ParamError{*e};
  const Fields f(j);
  ParsedRequest out;
  ResponsePlan& plan = out.plan;
  plan.endpoint = Endpoint::ChatCompletions;
  plan.id = response_id(f, header_request_id, "chatcmpl-");
  detail::parse_common_plan(f, ctx, plan);
  engine::SamplingParams params;
  std::optional<int64_t> requested;
  detail::parse_sampling(f, Endpoint::ChatCompletions, ctx, params, &requested);
  plan.logprobs = params.logprobs;

  check_messages(f.get("messages"));
  const json* tools = f.get("tools");
  check_tools(tools);
  plan.tool_choice = tool_choice(f, tools, ctx, &plan.tool_name);
  if (plan.tool_choice == ToolChoice::Auto) {
    plan.tool_call_parser = ctx.tool_call_parser;
    plan.tools = *tools;
  } else if (plan.tool_choice != ToolChoice::None) {
    plan.tools = *tools;
    params.guided_json = tool_grammar(plan.tool_choice, plan.tool_name, *tools);
  }
  if (f.get("chat_template"))
    reject("chat_template in a request is not allowed (start the server with --chat-template)",
           "chat_template");
  if (auto effort = f.string("reasoning_effort")) {
    static const char* const kEfforts[] = {"none", "minimal", "low", "medium",
                                           "high", "xhigh",   "max"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts))
      reject("reasoning_effort must be one of none, minimal, low, medium, high, xhigh, max",
             "reasoning_effort");
  }
  if (!ctx.tokenizer)
    reject(
        "chat completions need the tokenizer (the server runs with "
        "--skip-tokenizer-init): use /v1/completions with token ids",
        "messages");
  if (!ctx.chat)
    reject("this model has no chat template; start the server with --chat-template", "messages");

  text::ChatPromptRequest chat;
  std::string prompt;
  try {
    chat = text::chat_prompt_request_from_json(j);
    prompt = ctx.chat->render(chat);
  } catch (const Error& e) {
    reject(e.what(), "messages");
  }
  const bool add_special = f.boolean("add_special_tokens").value_or(false);
  std::vector<int32_t> ids = ctx.tokenizer->encode(prompt, add_special);
  if (ids.empty()) reject("the rendered prompt is empty", "messages");
  truncate_prompt(f, ctx, ids);

  // A guided output is the grammar's JSON from its first token: no reasoning to split off.
  if (plan.tool_choice == ToolChoice::None || plan.tool_choice == ToolChoice::Auto)
    plan.reasoning_parser = ctx.reasoning_parser;
  plan.thinking_enabled = thinking_from_prompt(prompt, ctx.chat->thinking_enabled(chat));
  plan.emit_reasoning = ctx.emit_reasoning;
  plan.emit_reasoning_content = ctx.emit_reasoning_content;
  if (!f.boolean("include_reasoning").value_or(true))
    plan.emit_reasoning = plan.emit_reasoning_content = false;
  finish_plan(plan, f, j, ctx, ctx.served_model_name);

  const int64_t max_tokens =
      detail::resolve_max_tokens(static_cast<int64_t>(ids.size()), requested, std::nullopt, ctx);
  if (params.min_tokens > max_tokens)
    reject(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}", max_tokens,
                       params.min_tokens),
           "min_tokens");
  out.requests = make_requests(plan, {ids}, params, {max_tokens});
  return out;
}

ParsedRequest parse_completion(std::string_view body, const ServingContext& ctx,
                               std::string_view header_request_id) {
  const json j = parse_object(body);
  if (auto e = check_model(j, ctx)) throw ParamError{*e};
  const Fields f(j);
  ParsedRequest out;
  ResponsePlan& plan = out.plan;
  plan.endpoint = Endpoint::Completions;
  plan.id = response_id(f, header_request_id, "cmpl-");
  detail::parse_common_plan(f, ctx, plan);
  engine::SamplingParams params;
  std::optional<int64_t> requested;
  detail::parse_sampling(f, Endpoint::Completions, ctx, params, &requested);
  plan.logprobs = params.logprobs;
  if (!params.stop.empty() && !ctx.tokenizer)
    reject("stop strings need the tokenizer (the server runs with --skip-tokenizer-init)", "stop");

  const std::vector<std::vector<int32_t>> prompts = completion_prompts(f, ctx);
  if (static_cast<int64_t>(prompts.size()) * plan.n > static_cast<int64_t>(kMaxPrompts))
    reject(fmt::format("prompts x n may be at most {}", kMaxPrompts), "n");
  std::vector<int64_t> max_tokens;
  for (const auto& ids : prompts) {
    // vLLM's completions default is 16, checked against the context like an explicit value.
    max_tokens.push_back(
        detail::resolve_max_tokens(static_cast<int64_t>(ids.size()), requested, int64_t{16}, ctx));
    if (params.min_tokens > max_tokens.back())
      reject(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}",
                         max_tokens.back(), params.min_tokens),
             "min_tokens");
  }
  finish_plan(plan, f, j, ctx, ctx.served_model_name);
  out.requests = make_requests(plan, prompts, params, max_tokens);
  return out;
}

}  // namespace

std::variant<json, ApiError> parse_json_body(std::string_view body, int max_depth) {
  if (!depth_within(body, max_depth))
    return bad_request(fmt::format("the JSON body nests deeper than {} levels", max_depth));
  try {
    return json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() names the byte offset and the problem, never the input itself.
    return bad_request(std::string("the body is not valid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return bad_request(std::string("the body is not valid JSON: ") + e.what());
  }
}

std::optional<ApiError> check_model(const json& request, const ServingContext& ctx) {
  auto it = request.find("model");
  if (it == request.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad_request("model must be a string", "model");
  const std::string name = it->get<std::string>();
  if (name == ctx.served_model_name) return std::nullopt;
  for (const std::string& alias : ctx.model_aliases)
    if (name == alias) return std::nullopt;
  return model_not_found(name.size() > 256 ? name.substr(0, 256) : name);
}

std::optional<std::string> check_serving_context(const ServingContext& ctx) {
  if (ctx.max_model_len < 2)
    return fmt::format("max_model_len must be at least 2, got {}", ctx.max_model_len);
  if (ctx.vocab_size < 1) return std::string("the vocabulary size is unknown");
  if (!ctx.tool_call_parser.empty() && !ToolParser::known(ctx.tool_call_parser))
    return fmt::format(
        "--tool-call-parser {}: unknown (strata knows nemotron_json, qwen3_coder, "
        "qwen3_xml)",
        ctx.tool_call_parser);
  if (ctx.enable_auto_tool_choice && ctx.tool_call_parser.empty())
    return std::string("--enable-auto-tool-choice needs --tool-call-parser");
  if (!ctx.reasoning_parser.empty() && !ReasoningParser::known(ctx.reasoning_parser))
    return fmt::format(
        "--reasoning-parser {}: unknown (strata knows nano_v3, nemotron, "
        "nemotron_nano_v2, nemotron_v3, deepseek_r1, qwen3)",
        ctx.reasoning_parser);
  if ((!ctx.tool_call_parser.empty() || !ctx.reasoning_parser.empty()) && !ctx.tokenizer)
    return std::string("tool-call and reasoning parsers need the tokenizer");
  return std::nullopt;
}

std::string random_id(std::string_view prefix) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(
      std::random_device{}() ^
      (static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())));
  const uint64_t a = rng(), b = rng() ^ counter.fetch_add(1, std::memory_order_relaxed);
  return fmt::format("{}{:016x}{:016x}", prefix, a, b);
}

ParseResult parse_completion_request(std::string_view body, const ServingContext& ctx,
                                     std::string_view header_request_id) {
  return detail::guard_request<ParseResult>([&] { return parse_completion(body, ctx, header_request_id); });
}

ParseResult parse_chat_request(std::string_view body, const ServingContext& ctx,
                               std::string_view header_request_id) {
  return detail::guard_request<ParseResult>([&] { return parse_chat(body, ctx, header_request_id); });
}

}  // namespace strata::server
