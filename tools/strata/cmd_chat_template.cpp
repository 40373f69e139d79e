// `strata chat-template --model DIR`: reads an OpenAI-style chat request as JSON on stdin
// ({"messages": [...], "tools": [...], "chat_template_kwargs": {...},
//   "add_generation_prompt": true}) and prints the prompt the model's chat template renders,
// with bos/eos from the model's tokenizer_config.json. `--template FILE` uses another template
// (like vLLM's --chat-template). add_generation_prompt defaults to true, as in the OpenAI API.
// As vLLM does before rendering, tool-call arguments sent as JSON strings are parsed into objects
// (--keep-argument-strings turns that off); a top-level "documents" reaches the template too.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "core/check.h"
#include "text/chat_template.h"

namespace {

struct ChatTemplateArgs {
  std::string model;
  std::string template_file;
  bool keep_argument_strings = false;
};

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run(const ChatTemplateArgs& args) {
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(read_all(std::cin));
  } catch (const nlohmann::json::exception& e) {
    strata::fail("stdin: the request is not valid JSON: {}", e.what());
  }
  if (!request.is_object()) strata::fail("stdin: the request must be a JSON object");
  if (!request.contains("messages")) strata::fail("stdin: the request has no \"messages\"");
  const nlohmann::ordered_json messages =
      args.keep_argument_strings ? request["messages"]
                                 : strata::parse_tool_call_arguments(request["messages"]);
  const nlohmann::ordered_json tools = request.value("tools", nlohmann::ordered_json());
  nlohmann::ordered_json kwargs = request.value("chat_template_kwargs", nlohmann::ordered_json());
  if (request.contains("documents") && !request["documents"].is_null()) {
    if (kwargs.is_null()) kwargs = nlohmann::ordered_json::object();
    if (kwargs.is_object() && !kwargs.contains("documents"))
      kwargs["documents"] = request["documents"];
  }
  bool add_generation_prompt = true;
  if (request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean())
      strata::fail("stdin: \"add_generation_prompt\" must be true or false");
    add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }

  const auto templates = strata::ModelChatTemplates::load(
      args.model, {}, /*require_template=*/args.template_file.empty());
  std::string prompt;
  if (!args.template_file.empty()) {
    std::ifstream in(args.template_file, std::ios::binary);
    if (!in) strata::fail("{}: cannot open for reading", args.template_file);
    const strata::ChatTemplate t(read_all(in), {}, args.template_file);
    prompt = t.render(messages, tools, add_generation_prompt, kwargs, templates.bos_token(),
                      templates.eos_token());
  } else {
    prompt = templates.render(messages, tools, add_generation_prompt, kwargs);
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

void setup(CLI::App& app) {
  auto args = std::make_shared<ChatTemplateArgs>();
  auto* cmd = app.add_subcommand(
      "chat-template", "Render a chat request (JSON on stdin) with a model's chat template");
  cmd->add_option("--model", args->model,
                  "model directory (tokenizer_config.json, chat_template.jinja)")
      ->required();
  cmd->add_option("--template", args->template_file, "use this Jinja template file instead");
  cmd->add_flag("--keep-argument-strings", args->keep_argument_strings,
                "pass tool-call arguments as sent (vLLM parses JSON strings into objects)");
  cmd->callback([args] { run(*args); });
}

}  // namespace

STRATA_COMMAND(setup);
