// `strata chat-template --model DIR`: reads an OpenAI-style chat request as JSON on stdin
// ({"messages": [...], "tools": [...], "chat_template_kwargs": {...},
//   "add_generation_prompt": true}) and prints the prompt the model's chat template renders,
// with bos/eos from the model's tokenizer_config.json. `--template FILE` uses another template
// (like vLLM's --chat-template). The request goes through text/chat_request.h, as the server's
// does: add_generation_prompt defaults to true, tool-call arguments sent as JSON strings are
// parsed into objects (--keep-argument-strings turns that off), text content parts are joined,
// and a top-level "documents" reaches the template too.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_request.h"
#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/bounded_file.h"
#include "text/chat_request.h"

namespace {

struct ChatTemplateArgs {
  std::string model;
  std::string template_file;
  bool keep_argument_strings = false;
};

void run(const ChatTemplateArgs& args) {
  // Read and parsed strictly (bounded nesting, duplicate keys refused, UTF-8 checked) by the
  // parser the request fuzzer runs, then rendered through text/chat_request.h.
  const strata::cli::ChatRequest r = strata::cli::parse_chat_request(
      strata::io::read_stdin_text("the chat request", strata::io::kStdinMaxBytes),
      args.keep_argument_strings);
  strata::text::ChatPromptRequest chat;
  chat.messages = r.messages;
  chat.tools = r.tools;
  if (r.kwargs.is_object()) {
    chat.template_kwargs = r.kwargs;
    if (r.kwargs.contains("documents")) {
      chat.documents = r.kwargs["documents"];
      chat.template_kwargs.erase("documents");
    }
  }
  chat.add_generation_prompt = r.add_generation_prompt;
  chat.parse_tool_call_arguments = !args.keep_argument_strings;
  const auto builder =
      strata::text::ChatPromptBuilder::from_model_dir(args.model, args.template_file);
  const std::string prompt = builder.render(chat);
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
