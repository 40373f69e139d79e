// An OpenAI server in the test process: the demo model's tokenizer and chat template, a
// ScriptedEngine underneath, port chosen by the kernel.
#pragma once

#include <memory>
#include <string>

#include "scripted_engine.h"
#include "server/openai_protocol.h"
#include "server/server.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"

namespace strata::server::testing {

std::string demo_model_dir();

struct HarnessOptions {
  ScriptedEngineOptions engine;
  ServerOptions server;
  std::string chat_template_file;  // empty: the demo model's
  std::string tool_call_parser, reasoning_parser;
  bool enable_auto_tool_choice = false;
};

class ServerHarness {
 public:
  explicit ServerHarness(HarnessOptions options = {});
  ~ServerHarness();
  uint16_t port() const { return server_->port(); }
  ScriptedEngine& engine() { return *engine_; }
  OpenAIServer& server() { return *server_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const ServingContext& context() const { return ctx_; }

 private:
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatPromptBuilder> chat_;
  ServingContext ctx_;
  ScriptedEngine* engine_ = nullptr;  // owned by the server
  std::unique_ptr<OpenAIServer> server_;
};

}  // namespace strata::server::testing
