// Chat templates: render a conversation into the prompt text exactly as HF transformers'
// apply_chat_template(..., tokenize=False) does (and so as vLLM does), with the sandboxed Jinja
// interpreter in text/jinja/.
//
// The template sees: messages, tools (None when the request has none), documents (None unless
// given in the kwargs), add_generation_prompt, bos_token, eos_token, and every key of
// chat_template_kwargs. Kwargs may not set the reserved names messages, tools,
// add_generation_prompt, bos_token, eos_token, chat_template or tokenize (vLLM lets some of them
// through; that was CVE-2025-62426 territory, so they are refused here).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/check.h"
#include "text/jinja/limits.h"
#include "text/jinja/template.h"

namespace strata {

class ChatTemplate {
 public:
  // Parses the template; throws strata::Error (a jinja::TemplateError) with the line of a syntax
  // error. `name` prefixes error messages (e.g. the file it came from).
  explicit ChatTemplate(std::string source, jinja::Limits limits = {},
                        std::string name = "chat template");

  // Throws strata::Error for malformed inputs (messages not an array, tools neither null nor an
  // array, kwargs not an object or setting a reserved name) and for any template error, including
  // raise_exception() (a jinja::TemplateError of kind Raised whose detail() is the message).
  // A nullopt token leaves the variable undefined, as transformers does for a tokenizer that has
  // no such special token.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                     std::optional<std::string> bos_token,
                     std::optional<std::string> eos_token) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  jinja::Template template_;
};

// vLLM's preprocessing of OpenAI chat messages before the template
// (entrypoints/chat_utils.py _postprocess_messages): in assistant messages, each
// tool_calls[].function.arguments given as a JSON string (as OpenAI clients send it) is parsed,
// since templates iterate it (`arguments | items`); null or "" become {}. Other messages are
// unchanged. Throws strata::Error naming the message when a string is not valid JSON.
nlohmann::ordered_json parse_tool_call_arguments(nlohmann::ordered_json messages);

// The chat template(s) and special tokens of a model directory, found as transformers finds
// them: chat_template.jinja (which wins), else tokenizer_config.json's "chat_template" (a string,
// or a list of {"name", "template"}), plus additional_chat_templates/NAME.jinja.
class ModelChatTemplates {
 public:
  // Throws strata::Error naming the file and the problem (no template when one is required, bad
  // JSON, bad entry). Without require_template, only the special tokens may be found.
  static ModelChatTemplates load(const std::filesystem::path& model_dir, jinja::Limits limits = {},
                                 bool require_template = true);

  // transformers' choice: with tools, "tool_use" when present; otherwise "default" (a single
  // template is "default"). Throws when there is no such template.
  const ChatTemplate& select(bool has_tools) const;
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs) const;

  const std::map<std::string, ChatTemplate>& templates() const { return templates_; }
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }

 private:
  std::map<std::string, ChatTemplate> templates_;
  std::optional<std::string> bos_token_, eos_token_;
};

}  // namespace strata
