#include "text/chat_template.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "text/jinja/value_json.h"

namespace strata {
namespace {

constexpr const char* kReserved[] = {"messages",  "tools",     "add_generation_prompt",
                                     "bos_token", "eos_token", "chat_template",
                                     "tokenize"};

std::string read_file(const std::filesystem::path& path) {
  return io::read_text_file(path.string(), "chat template file", io::kTemplateMaxBytes);
}

// A special token in tokenizer_config.json: a string, an AddedToken object {"content": ...}, or
// null / absent.
std::optional<std::string> special_token(const nlohmann::ordered_json& config, const char* key,
                                         const std::filesystem::path& file) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  fail("{}: \"{}\" must be a string or an object with a string \"content\"", file.string(), key);
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, jinja::Limits limits, std::string name)
    : source_(std::move(source)), template_(source_, limits, std::move(name)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_kwargs,
                                 std::optional<std::string> bos_token,
                                 std::optional<std::string> eos_token) const {
  if (!messages.is_array()) fail("chat template: messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array())
    fail("chat template: tools must be null or a JSON array");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object())
    fail("chat template: chat_template_kwargs must be a JSON object");

  using jinja::Value;
  jinja::Dict vars;
  vars.set(Value::string("messages"), jinja::from_json(messages));
  vars.set(Value::string("tools"), jinja::from_json(tools));
  vars.set(Value::string("documents"), Value::none());
  vars.set(Value::string("add_generation_prompt"), Value::boolean(add_generation_prompt));
  if (bos_token) vars.set(Value::string("bos_token"), Value::string(*bos_token));
  if (eos_token) vars.set(Value::string("eos_token"), Value::string(*eos_token));
  if (extra_kwargs.is_object()) {
    for (const auto& [key, value] : extra_kwargs.items()) {
      if (std::find(std::begin(kReserved), std::end(kReserved), key) != std::end(kReserved))
        fail("chat template: chat_template_kwargs may not set '{}', a reserved variable", key);
      vars.set(Value::string(key), jinja::from_json(value));
    }
  }
  return template_.render(vars);
}

nlohmann::ordered_json parse_tool_call_arguments(nlohmann::ordered_json messages) {
  if (!messages.is_array()) return messages;
  for (size_t i = 0; i < messages.size(); ++i) {
    auto& m = messages[i];
    if (!m.is_object() || m.value("role", nlohmann::ordered_json()) != "assistant") continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (size_t k = 0; k < calls->size(); ++k) {
      auto& call = (*calls)[k];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        continue;
      auto& fn = call["function"];
      auto args = fn.find("arguments");
      const bool empty = args == fn.end() || args->is_null() ||
                         (args->is_string() && args->get<std::string>().empty());
      if (empty) {
        fn["arguments"] = nlohmann::ordered_json::object();
      } else if (args->is_string()) {
        *args = io::parse_ordered_json_strict(
            args->get<std::string>(),
            fmt::format("messages[{}].tool_calls[{}].function.arguments", i, k),
            io::kRequestJsonMaxDepth);
      }
    }
  }
  return messages;
}

ModelChatTemplates ModelChatTemplates::load(const std::filesystem::path& model_dir,
                                            jinja::Limits limits, bool require_template) {
  if (!std::filesystem::is_directory(model_dir)) fail("{}: not a directory", model_dir.string());
  ModelChatTemplates out;
  const auto config_path = model_dir / "tokenizer_config.json";
  const auto jinja_path = model_dir / "chat_template.jinja";
  std::map<std::string, std::pair<std::string, std::string>> sources;  // name -> (text, origin)

  if (std::filesystem::exists(config_path)) {
    const nlohmann::ordered_json config = io::parse_ordered_json_strict(
        read_file(config_path), config_path.string(), io::kFileJsonMaxDepth);
    if (!config.is_object()) fail("{}: expected a JSON object", config_path.string());
    out.bos_token_ = special_token(config, "bos_token", config_path);
    out.eos_token_ = special_token(config, "eos_token", config_path);
    auto ct = config.find("chat_template");
    if (ct != config.end() && !ct->is_null()) {
      if (ct->is_string()) {
        sources["default"] = {ct->get<std::string>(), config_path.string()};
      } else if (ct->is_array()) {
        for (const auto& entry : *ct) {
          if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
              !entry["name"].is_string() || !entry["template"].is_string())
            fail("{}: chat_template list entries must be {{\"name\": str, \"template\": str}}",
                 config_path.string());
          const std::string name = entry["name"].get<std::string>();
          sources[name] = {entry["template"].get<std::string>(),
                           fmt::format("{} ({})", config_path.string(), name)};
        }
      } else {
        fail("{}: chat_template must be a string or a list of named templates",
             config_path.string());
      }
    }
  }
  if (std::filesystem::exists(jinja_path)) {
    // transformers: chat_template.jinja clobbers any template in tokenizer_config.json.
    sources.erase("default");
    sources["default"] = {read_file(jinja_path), jinja_path.string()};
  }
  const auto extra_dir = model_dir / "additional_chat_templates";
  if (std::filesystem::is_directory(extra_dir)) {
    for (const auto& e : std::filesystem::directory_iterator(extra_dir)) {
      if (e.path().extension() == ".jinja")
        sources[e.path().stem().string()] = {read_file(e.path()), e.path().string()};
    }
  }
  if (sources.empty() && require_template) {
    fail(
        "{}: no chat template (neither chat_template.jinja nor a chat_template in "
        "tokenizer_config.json)",
        model_dir.string());
  }
  for (auto& [name, src] : sources)
    out.templates_.emplace(name, ChatTemplate(std::move(src.first), limits, src.second));
  return out;
}

const ChatTemplate& ModelChatTemplates::select(bool has_tools) const {
  if (has_tools) {
    auto it = templates_.find("tool_use");
    if (it != templates_.end()) return it->second;
  }
  auto it = templates_.find("default");
  if (it != templates_.end()) return it->second;
  if (templates_.empty()) fail("this model has no chat template");
  fail("this model has several chat templates and none is named \"default\"{}",
       has_tools ? " or \"tool_use\"" : "");
}

std::string ModelChatTemplates::render(const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& extra_kwargs) const {
  return select(!tools.is_null())
      .render(messages, tools, add_generation_prompt, extra_kwargs, bos_token_, eos_token_);
}

}  // namespace strata
