// Shared set-up for the protocol tests: the demo model's tokenizer and ChatML template behind a
// ServingContext with a small context (so the length limits are easy to reach).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>

#include "server/openai_protocol.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"

namespace strata::server::testing {

inline std::string demo_dir() {
  return std::string(STRATA_SOURCE_DIR) + "/models/demo";
}
inline std::string chat_fixture(const std::string& name) {
  return std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/chat/templates/" + name;
}

struct DemoServer {
  text::Tokenizer tok = text::Tokenizer::from_dir(demo_dir());
  text::ChatPromptBuilder chat = text::ChatPromptBuilder::from_model_dir(demo_dir());
  ServingContext ctx;

  explicit DemoServer(int64_t max_model_len = 64) {
    ctx.served_model_name = "demo";
    ctx.model_aliases = {demo_dir()};
    ctx.model_root = demo_dir();
    ctx.max_model_len = max_model_len;
    ctx.vocab_size = tok.vocab_size();
    ctx.tokenizer = &tok;
    ctx.chat = &chat;
  }
};

// The parsed request (a copy: the result is usually a temporary); an error fails the test.
inline ParsedRequest ok(const ParseResult& r) {
  if (const auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error " << e->status << ": " << e->message;
    ParsedRequest empty;
    empty.requests.resize(1);
    empty.plan.prompt_ids.resize(1);
    return empty;
  }
  return std::get<ParsedRequest>(r);
}

}  // namespace strata::server::testing
