#include "text/chat_request.h"

#include "io/bounded_file.h"
#include "io/json_strict.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/check.h"
#include "text/tokenizer.h"

namespace strata::text {

using json = nlohmann::ordered_json;

namespace {

// A message's content as the template sees it: a string stays, null stays, a list of text parts
// becomes their texts joined with "\n" (vLLM's default "string" content format).
json flatten_content(const json& content, size_t index) {
  if (!content.is_array()) {
    if (content.is_string() || content.is_null()) return content;
    fail("messages[{}].content must be a string, null or a list of content parts", index);
  }
  std::string joined;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    if (part.is_string()) {  // vLLM accepts a bare string as a text part
      joined += (k ? "\n" : "") + part.get<std::string>();
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail("messages[{}].content[{}] must be an object with a \"type\"", index, k);
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text")
      fail("messages[{}].content[{}]: content parts of type \"{}\" are not supported (text only)",
           index, k, type);
    if (!part.contains("text") || !part["text"].is_string())
      fail("messages[{}].content[{}].text must be a string", index, k);
    joined += (k ? "\n" : "") + part["text"].get<std::string>();
  }
  return joined;
}

template <class T>
T optional_field(const json& request, const char* name, const char* what) {
  const json& v = request[name];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail("{} must be true or false", name);
  } else {
    if (!v.is_string()) fail("{} must be {}", name, what);
  }
  return v.get<T>();
}

}  // namespace

ChatPromptRequest chat_prompt_request_from_json(const json& request) {
  if (!request.is_object()) fail("the request must be a JSON object");
  ChatPromptRequest r;
  if (!request.contains("messages")) fail("the request has no messages");
  if (!request["messages"].is_array()) fail("messages must be a JSON array");
  r.messages = request["messages"];
  if (request.contains("tools") && !request["tools"].is_null()) {
    if (!request["tools"].is_array()) fail("tools must be a list of tool definitions");
    r.tools = request["tools"];
  }
  if (request.contains("documents") && !request["documents"].is_null()) {
    if (!request["documents"].is_array()) fail("documents must be a list");
    r.documents = request["documents"];
  }
  if (request.contains("chat_template_kwargs") && !request["chat_template_kwargs"].is_null()) {
    if (!request["chat_template_kwargs"].is_object())
      fail("chat_template_kwargs must be a JSON object");
    r.template_kwargs = request["chat_template_kwargs"];
  }
  if (request.contains("reasoning_effort") && !request["reasoning_effort"].is_null())
    r.reasoning_effort = optional_field<std::string>(request, "reasoning_effort", "a string");
  if (request.contains("add_generation_prompt"))
    r.add_generation_prompt = optional_field<bool>(request, "add_generation_prompt", "");
  if (request.contains("continue_final_message"))
    r.continue_final_message = optional_field<bool>(request, "continue_final_message", "");
  return r;
}

json normalize_chat_messages(const json& messages, bool parse_tool_call_arguments_flag) {
  if (!messages.is_array()) fail("messages must be a JSON array");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object()) fail("messages[{}] must be a JSON object", i);
    if (!m.contains("role") || !m["role"].is_string())
      fail("messages[{}] has no role (a string)", i);
    json n = m;
    if (n.contains("content")) n["content"] = flatten_content(n["content"], i);
    if (n["role"] == "assistant") {
      // Clients send the reasoning under either name; templates read one or the other.
      const bool has_r = n.contains("reasoning") && n["reasoning"].is_string();
      const bool has_rc = n.contains("reasoning_content") && n["reasoning_content"].is_string();
      if (has_r && !has_rc) n["reasoning_content"] = n["reasoning"];
      if (has_rc && !has_r) n["reasoning"] = n["reasoning_content"];
    }
    out.push_back(std::move(n));
  }
  return parse_tool_call_arguments_flag ? parse_tool_call_arguments(std::move(out)) : out;
}

ChatPromptBuilder ChatPromptBuilder::from_model_dir(const std::filesystem::path& model_dir,
                                                    const std::filesystem::path& template_file,
                                                    json default_kwargs) {
  ChatPromptBuilder b;
  auto templates = std::make_shared<const ModelChatTemplates>(
      ModelChatTemplates::load(model_dir, {}, /*require_template=*/template_file.empty()));
  b.bos_token_ = templates->bos_token();
  b.eos_token_ = templates->eos_token();
  if (!template_file.empty()) {
    b.override_ = std::make_shared<const ChatTemplate>(
        io::read_text_file(template_file.string(), "chat template", io::kTemplateMaxBytes),
                                                       jinja::Limits{}, template_file.string());
  } else {
    b.model_templates_ = std::move(templates);
  }
  if (!default_kwargs.is_null()) {
    if (!default_kwargs.is_object()) fail("the default chat template kwargs must be a JSON object");
    b.default_kwargs_ = std::move(default_kwargs);
  }
  return b;
}

ChatPromptBuilder ChatPromptBuilder::from_source(std::string source,
                                                 std::optional<std::string> bos_token,
                                                 std::optional<std::string> eos_token,
                                                 json default_kwargs) {
  ChatPromptBuilder b;
  b.override_ = std::make_shared<const ChatTemplate>(std::move(source));
  b.bos_token_ = std::move(bos_token);
  b.eos_token_ = std::move(eos_token);
  if (!default_kwargs.is_null()) {
    if (!default_kwargs.is_object()) fail("the default chat template kwargs must be a JSON object");
    b.default_kwargs_ = std::move(default_kwargs);
  }
  return b;
}

json ChatPromptBuilder::template_kwargs(const ChatPromptRequest& request) const {
  json kwargs = default_kwargs_;
  if (request.template_kwargs.is_object())
    for (const auto& [key, value] : request.template_kwargs.items())
      kwargs[key] = value;
  if (!request.documents.is_null() && !kwargs.contains("documents"))
    kwargs["documents"] = request.documents;
  // vLLM: reasoning_effort decides enable_thinking unless the kwargs already do.
  if (request.reasoning_effort && !kwargs.contains("enable_thinking"))
    kwargs["enable_thinking"] = *request.reasoning_effort != "none";
  return kwargs;
}

bool ChatPromptBuilder::thinking_enabled(const ChatPromptRequest& request) const {
  const json kwargs = template_kwargs(request);
  return !(kwargs.contains("enable_thinking") && kwargs["enable_thinking"].is_boolean() &&
           !kwargs["enable_thinking"].get<bool>());
}

std::string ChatPromptBuilder::render(const ChatPromptRequest& request) const {
  if (request.add_generation_prompt && request.continue_final_message)
    fail("continue_final_message and add_generation_prompt cannot both be true");
  const json messages =
      normalize_chat_messages(request.messages, request.parse_tool_call_arguments);
  const json kwargs = template_kwargs(request);
  std::string rendered =
      override_ ? override_->render(messages, request.tools, request.add_generation_prompt, kwargs,
                                    bos_token_, eos_token_)
                : model_templates_->render(messages, request.tools, request.add_generation_prompt,
                                           kwargs);
  if (!request.continue_final_message) return rendered;
  // As transformers does: cut the rendering right after the final message's content, so the
  // model continues that message instead of closing it.
  if (messages.empty() || messages.back()["role"] != "assistant")
    fail("continue_final_message needs a final assistant message");
  const json& content = messages.back().value("content", json());
  if (!content.is_string()) fail("continue_final_message needs the final message's content");
  const std::string final_text = content.get<std::string>();
  const auto not_space = [](char c) { return c != ' ' && c != '\n' && c != '\t' && c != '\r'; };
  const size_t first =
      std::find_if(final_text.begin(), final_text.end(), not_space) - final_text.begin();
  const size_t last =
      final_text.rend() - std::find_if(final_text.rbegin(), final_text.rend(), not_space);
  if (first >= last) fail("continue_final_message needs a non-empty final message");
  const std::string stripped = final_text.substr(first, last - first);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos)
    fail("continue_final_message: the final message does not appear in the rendered chat");
  // transformers keeps the trailing whitespace only when the template wrote the message
  // exactly as given (no leading whitespace, trailing whitespace kept).
  const size_t lstripped_len = final_text.size() - first;
  const bool whole = rendered.compare(at, lstripped_len, final_text) == 0;
  rendered.resize(at + (whole ? lstripped_len : stripped.size()));
  return rendered;
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tokenizer, const std::string& rendered,
                                        bool add_special_tokens) {
  return tokenizer.encode(rendered, add_special_tokens);
}

ChatPromptRequest single_turn_chat(const std::string& user, const std::string& system) {
  ChatPromptRequest r;
  if (!system.empty()) r.messages.push_back({{"role", "system"}, {"content", system}});
  r.messages.push_back({{"role", "user"}, {"content", user}});
  return r;
}

std::vector<int32_t> chat_prompt_ids(const ChatPromptBuilder& builder, const Tokenizer& tokenizer,
                                     const ChatPromptRequest& request) {
  return encode_chat_prompt(tokenizer, builder.render(request));
}

}  // namespace strata::text
