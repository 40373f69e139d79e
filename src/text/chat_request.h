// An OpenAI chat request turned into a prompt, the way vLLM's chat path does it: messages
// (string content or a list of text parts, joined with "\n"), tools, documents,
// chat_template_kwargs (over the server's --default-chat-template-kwargs; reasoning_effort
// sets enable_thinking when the kwargs do not), add_generation_prompt and
// continue_final_message -> the chat template's text -> ids (encoded without special tokens
// unless asked: the template writes them). Tool-call arguments sent as JSON strings are parsed
// into objects first (templates iterate them), and an assistant message's `reasoning` and
// `reasoning_content` are made to carry the same text (clients send either name).
// `strata chat-template`, `strata generate --chat` and the server all go through here.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace strata::text {

class Tokenizer;

struct ChatPromptRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null or an array
  nlohmann::ordered_json documents;  // null or an array
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  std::optional<std::string> reasoning_effort;  // "none" -> enable_thinking false
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool parse_tool_call_arguments = true;  // false: --keep-argument-strings
};

// Reads the chat fields of an OpenAI request body (messages, tools, documents,
// chat_template_kwargs, reasoning_effort, add_generation_prompt, continue_final_message).
// Throws strata::Error naming the field for a wrong type (the server turns it into a 400).
ChatPromptRequest chat_prompt_request_from_json(const nlohmann::ordered_json& request);

// The messages as the template sees them: content parts joined, tool-call arguments parsed,
// reasoning / reasoning_content mirrored. Throws strata::Error naming the message at fault
// (not an object, no role, a non-text content part, arguments that are not JSON).
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages,
                                               bool parse_tool_call_arguments = true);

// A model's chat template(s) (or a --chat-template override) with its special tokens and the
// server-wide default template kwargs. Immutable; render() may run on many threads.
class ChatPromptBuilder {
 public:
  // From a model directory (chat_template.jinja / tokenizer_config.json); `template_file`
  // non-empty replaces the model's template. Throws strata::Error naming the file.
  static ChatPromptBuilder from_model_dir(const std::filesystem::path& model_dir,
                                          const std::filesystem::path& template_file = {},
                                          nlohmann::ordered_json default_kwargs = nullptr);
  // From template text (tests, tools); bos / eos as the template should see them.
  static ChatPromptBuilder from_source(std::string source, std::optional<std::string> bos_token,
                                       std::optional<std::string> eos_token,
                                       nlohmann::ordered_json default_kwargs = nullptr);

  // The rendered prompt text. Throws strata::Error (template errors, bad messages, both
  // add_generation_prompt and continue_final_message, ...).
  std::string render(const ChatPromptRequest& request) const;
  // The kwargs the template gets for this request (defaults, request kwargs, documents,
  // enable_thinking from reasoning_effort).
  nlohmann::ordered_json template_kwargs(const ChatPromptRequest& request) const;
  // Whether this request renders with thinking on (enable_thinking unset counts as on, as the
  // Nemotron templates default it).
  bool thinking_enabled(const ChatPromptRequest& request) const;

 private:
  ChatPromptBuilder() = default;
  std::shared_ptr<const ModelChatTemplates> model_templates_;  // null with an override
  std::shared_ptr<const ChatTemplate> override_;
  std::optional<std::string> bos_token_, eos_token_;
  nlohmann::ordered_json default_kwargs_ = nlohmann::ordered_json::object();
};

// Ids of a rendered chat prompt: encoded without special tokens by default (vLLM's chat default
// add_special_tokens=false: the template already wrote them).
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tokenizer, const std::string& rendered,
                                        bool add_special_tokens = false);

// A one-turn conversation: an optional system message, then the user's text (what
// `strata generate --chat [--system S]` sends).
ChatPromptRequest single_turn_chat(const std::string& user, const std::string& system = {});
// render + encode_chat_prompt.
std::vector<int32_t> chat_prompt_ids(const ChatPromptBuilder& builder, const Tokenizer& tokenizer,
                                     const ChatPromptRequest& request);

}  // namespace strata::text
