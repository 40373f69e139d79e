#include "server_harness.h"

namespace strata::server::testing {

std::string demo_model_dir() { return std::string(STRATA_SOURCE_DIR) + "/models/demo"; }

ServerHarness::ServerHarness(HarnessOptions options) {
  tokenizer_ = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(demo_model_dir()));
  chat_ = std::make_unique<text::ChatPromptBuilder>(
      text::ChatPromptBuilder::from_model_dir(demo_model_dir(), options.chat_template_file));
  ctx_.served_model_name = "demo";
  ctx_.model_aliases = {demo_model_dir()};
  ctx_.model_root = demo_model_dir();
  ctx_.max_model_len = 1024;
  ctx_.vocab_size = tokenizer_->vocab_size();
  ctx_.tokenizer = tokenizer_.get();
  ctx_.chat = chat_.get();
  ctx_.tool_call_parser = options.tool_call_parser;
  ctx_.reasoning_parser = options.reasoning_parser;
  ctx_.enable_auto_tool_choice = options.enable_auto_tool_choice;
  options.engine.vocab_size = ctx_.vocab_size;
  options.engine.tokenizer = tokenizer_.get();
  auto engine = std::make_unique<ScriptedEngine>(options.engine);
  engine_ = engine.get();
  options.server.host = "127.0.0.1";
  options.server.port = 0;
  server_ = std::make_unique<OpenAIServer>(ctx_, std::move(engine), options.server);
  server_->start();
}

ServerHarness::~ServerHarness() { server_->shutdown(); }

}  // namespace strata::server::testing
