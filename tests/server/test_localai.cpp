// The LocalAI backend driven by a gRPC client built from the same proto: Health before a model,
// LoadModel's option mapping reaching the loader, Predict / PredictStream on the scripted
// engine (same text, cumulative token counts), TokenizeString, cancellation freeing the
// engine request, Status and Free.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <thread>

#include "scripted_engine.h"
#include "server/localai_backend.h"
#include "server_harness.h"
#include "text/tokenizer.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;

struct LocalAIFixture {
  text::Tokenizer tokenizer = text::Tokenizer::from_dir(testing::demo_model_dir());
  std::unique_ptr<text::ChatPromptBuilder> chat = std::make_unique<text::ChatPromptBuilder>(
      text::ChatPromptBuilder::from_model_dir(testing::demo_model_dir()));
  ServingContext ctx;
  testing::ScriptedEngine* engine = nullptr;
  backend::ModelOptions last_options;
  std::unique_ptr<LocalAIBackend> backend;
  std::unique_ptr<backend::Backend::Stub> stub;

  LocalAIFixture() {
    ctx.served_model_name = "demo";
    ctx.max_model_len = 1024;
    ctx.vocab_size = tokenizer.vocab_size();
    ctx.tokenizer = &tokenizer;
    ctx.chat = chat.get();
    backend = std::make_unique<LocalAIBackend>([this](const backend::ModelOptions& o) {
      last_options = o;
      if (o.modelfile() == "missing") fail("no model at {}", o.modelfile());
      testing::ScriptedEngineOptions eo;
      eo.tokenizer = &tokenizer;
      eo.vocab_size = ctx.vocab_size;
      auto e = std::make_shared<testing::ScriptedEngine>(eo);
      engine = e.get();
      LocalAIModel m;
      m.ctx = &ctx;
      m.engine = e.get();
      m.owner = e;
      return m;
    });
    backend->start("127.0.0.1:0");
    stub = backend::Backend::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(backend->port()), grpc::InsecureChannelCredentials()));
  }
  ~LocalAIFixture() { backend->shutdown(); }

  void load() {
    grpc::ClientContext c;
    backend::ModelOptions o;
    o.set_modelfile("demo-dir");
    o.set_contextsize(512);
    o.add_options("max_num_seqs:4");
    backend::Result r;
    ASSERT_TRUE(stub->LoadModel(&c, o, &r).ok());
    ASSERT_TRUE(r.success()) << r.message();
  }
  std::string expected_text(const std::string& prompt, int64_t n) {
    std::string text;
    for (int32_t id : engine->expected_ids(tokenizer.encode(prompt, true), 0, n))
      text += tokenizer.decode(std::vector<int32_t>{id}, true);
    return text;
  }
};

TEST(LocalAI, HealthAnswersOkBeforeAnyModelAndStatusSaysUninitialized) {
  LocalAIFixture f;
  grpc::ClientContext c1, c2, c3;
  backend::HealthMessage h;
  backend::Reply reply;
  ASSERT_TRUE(f.stub->Health(&c1, h, &reply).ok());
  EXPECT_EQ(reply.message(), "OK");
  backend::StatusResponse status;
  ASSERT_TRUE(f.stub->Status(&c2, h, &status).ok());
  EXPECT_EQ(status.state(), backend::StatusResponse::UNINITIALIZED);
  backend::PredictOptions p;
  p.set_prompt("hello");
  grpc::Status s = f.stub->Predict(&c3, p, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(LocalAI, LoadModelFailureIsAResultNotACrash) {
  LocalAIFixture f;
  grpc::ClientContext c;
  backend::ModelOptions o;
  o.set_modelfile("missing");
  backend::Result r;
  ASSERT_TRUE(f.stub->LoadModel(&c, o, &r).ok());
  EXPECT_FALSE(r.success());
  EXPECT_NE(r.message().find("no model at missing"), std::string::npos);
}

TEST(LocalAI, PredictAndPredictStreamGiveTheEngineText) {
  LocalAIFixture f;
  f.load();
  EXPECT_EQ(f.last_options.contextsize(), 512);
  ASSERT_EQ(f.last_options.options_size(), 1);
  backend::PredictOptions p;
  p.set_prompt("The quick brown fox");
  p.set_tokens(9);
  p.set_temperature(0);
  grpc::ClientContext c1;
  backend::Reply reply;
  ASSERT_TRUE(f.stub->Predict(&c1, p, &reply).ok());
  EXPECT_EQ(reply.message(), f.expected_text("The quick brown fox", 9));
  EXPECT_EQ(reply.tokens(), 9);
  EXPECT_EQ(reply.prompt_tokens(), static_cast<int32_t>(f.tokenizer.encode("The quick brown fox", true).size()));

  grpc::ClientContext c2;
  auto stream = f.stub->PredictStream(&c2, p);
  backend::Reply piece;
  std::string text;
  int32_t last_tokens = 0, pieces = 0;
  while (stream->Read(&piece)) {
    text += piece.message();
    EXPECT_GE(piece.tokens(), last_tokens);  // cumulative
    last_tokens = piece.tokens();
    pieces++;
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(text, reply.message());
  EXPECT_EQ(last_tokens, 9);
  EXPECT_GE(pieces, 2);
}

TEST(LocalAI, ChatWithTokenizerTemplateUsesTheMessages) {
  LocalAIFixture f;
  f.load();
  backend::PredictOptions p;
  p.set_usetokenizertemplate(true);
  auto* m = p.add_messages();
  m->set_role("user");
  m->set_content("hi there");
  p.set_tokens(5);
  grpc::ClientContext c;
  backend::Reply reply;
  ASSERT_TRUE(f.stub->Predict(&c, p, &reply).ok());
  EXPECT_EQ(reply.tokens(), 5);
  EXPECT_FALSE(reply.message().empty());
  // The prompt is the rendered chat, longer than the message itself.
  EXPECT_GT(reply.prompt_tokens(), static_cast<int32_t>(f.tokenizer.encode("hi there", false).size()));
}

TEST(LocalAI, TokenizeStringMatchesTheTokenizer) {
  LocalAIFixture f;
  f.load();
  backend::PredictOptions p;
  p.set_prompt("Hello, world");
  grpc::ClientContext c;
  backend::TokenizationResponse r;
  ASSERT_TRUE(f.stub->TokenizeString(&c, p, &r).ok());
  const auto want = f.tokenizer.encode("Hello, world", true);
  ASSERT_EQ(r.length(), static_cast<int32_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r.tokens(static_cast<int>(i)), want[i]);
}

TEST(LocalAI, CancelledStreamAbortsTheEngineRequest) {
  LocalAIFixture f;
  f.load();
  backend::PredictOptions p;
  p.set_prompt("go on forever");
  p.set_tokens(1000);  // within the 1024-token context; cancelled long before
  p.set_ignoreeos(true);
  grpc::ClientContext c;
  auto stream = f.stub->PredictStream(&c, p);
  backend::Reply piece;
  ASSERT_TRUE(stream->Read(&piece));
  c.TryCancel();
  while (stream->Read(&piece)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (f.engine->live_requests() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(f.engine->live_requests(), 0);
  EXPECT_EQ(f.engine->aborted(), 1);
}

TEST(LocalAI, StatusIsReadyAfterLoadAndFreeUnloads) {
  LocalAIFixture f;
  f.load();
  backend::HealthMessage h;
  backend::StatusResponse status;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(f.stub->Status(&c, h, &status).ok());
    EXPECT_EQ(status.state(), backend::StatusResponse::READY);
  }
  {
    grpc::ClientContext c;
    backend::Result r;
    ASSERT_TRUE(f.stub->Free(&c, h, &r).ok());
    EXPECT_TRUE(r.success());
  }
  grpc::ClientContext c;
  ASSERT_TRUE(f.stub->Status(&c, h, &status).ok());
  EXPECT_EQ(status.state(), backend::StatusResponse::UNINITIALIZED);
}

}  // namespace
}  // namespace strata::server
