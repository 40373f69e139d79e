// `strata chat-template --model DIR`: reads an OpenAI-style chat request as JSON on stdin
// ({"messages": [...], "tools": [...], "chat_template_kwargs": {...},
//   "add_generation_prompt": true}) and prints the prompt the model's chat template renders,
// with bos/eos from the model's tokenizer_config.json. `--template FILE` uses another template
// (like vLLM's --chat-template). add_generation_prompt defaults to true, as in the OpenAI API.
// As vLLM does before rendering, tool-call arguments sent as JSON strings are parsed into objects
// (--keep-argument-strings turns that off); a top-level "documents" reaches the template too.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_request.h"
#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "text/chat_template.h"

namespace {

struct ChatTemplateArgs {
  std::string model;
  std::string template_file;
  bool keep_argument_strings = false;
};

void run(const ChatTemplateArgs& args) {
  const strata::cli::ChatRequest r = strata::cli::parse_chat_request(
      strata::io::read_stdin_text("the chat request", strata::io::kStdinMaxBytes),
      args.keep_argument_strings);
  const auto templates = strata::ModelChatTemplates::load(
      args.model, {}, /*require_template=*/args.template_file.empty());
  std::string prompt;
  if (!args.template_file.empty()) {
    const strata::ChatTemplate t(strata::io::read_text_file(args.template_file, "chat template",
                                                            strata::io::kTemplateMaxBytes),
                                 {}, args.template_file);
    prompt = t.render(r.messages, r.tools, r.add_generation_prompt, r.kwargs, templates.bos_token(),
                      templates.eos_token());
  } else {
    prompt = templates.render(r.messages, r.tools, r.add_generation_prompt, r.kwargs);
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  strata::io::check_stdout();
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
