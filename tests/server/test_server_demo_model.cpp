// The server over the real engine with the demo model (CPU): 512 concurrent streaming clients,
// 20% of them gone mid-stream; afterwards the engine holds no request, no KV block and no Mamba
// slot (vllm:kv_cache_usage_perc and the Mamba gauge back to 0 in /metrics, parsed strictly),
// and every survivor's greedy text equals the same request run alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "engine/engine.h"
#include "model/nemotron_h/load.h"
#include "prometheus_text.h"
#include "raw_client.h"
#include "server/localai_backend.h"
#include "server/server.h"
#include "server_harness.h"
#include "text/chat_request.h"
#include "text/generation_config.h"
#include "text/tokenizer.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::http_request;
using testing::RawClient;
using testing::status_of;

struct DemoServer {
  std::unique_ptr<model::NemotronHModel> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  ServingContext ctx;
  std::unique_ptr<OpenAIServer> server;

  explicit DemoServer(int64_t max_num_seqs) {
    const std::string dir = testing::demo_model_dir();
    model = model::load_model(dir, Device::Host);
    tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(dir));
    engine::EngineConfig config;
    config.executor.max_num_seqs = max_num_seqs;
    config.executor.max_model_len = 256;
    config.eos_ids = text::stop_token_ids(dir, tokenizer.get(), false);
    auto llm = std::make_unique<engine::LLMEngine>(*model, tokenizer.get(), config);
    ctx.served_model_name = "demo";
    ctx.max_model_len = llm->executor().max_model_len();
    ctx.vocab_size = static_cast<int32_t>(model->config().vocab_size);
    ctx.tokenizer = tokenizer.get();
    ServerOptions o;
    o.port = 0;
    o.io_threads = 2;
    server = std::make_unique<OpenAIServer>(
        ctx, make_async_engine_client(std::make_unique<engine::AsyncEngine>(std::move(llm))), o);
    server->start();
  }
  ~DemoServer() { server->shutdown(); }
};

std::string stream_text(const std::string& body, bool* done) {
  std::string text;
  *done = body.find("data: [DONE]") != std::string::npos;
  size_t pos = 0;
  while ((pos = body.find("data: {", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    auto j = json::parse(body.substr(pos + 6, end - pos - 6));
    if (!j["choices"].empty()) text += j["choices"][0]["text"].get<std::string>();
    pos = end;
  }
  return text;
}

TEST(ServerDemoModel, DisconnectStormLeaksNothingAndSurvivorsMatchTheirSoloRun) {
  DemoServer s(/*max_num_seqs=*/128);
  const char* prompts[] = {"The meaning of life is", "A fool and his money", "Never trust",
                           "Life is", "In the beginning", "Money", "Love is", "Q: Why?\nA:"};
  constexpr int kPrompts = 8, kClients = 512, kTokens = 16;
  auto body = [&](int p) {
    return json{{"model", "demo"}, {"prompt", prompts[p]}, {"max_tokens", kTokens},
                {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}
        .dump();
  };
  // Each prompt alone first: the baseline.
  std::map<int, std::string> solo;
  for (int p = 0; p < kPrompts; ++p) {
    RawClient c(s.server->port(), 60s);
    c.send(http_request("POST", "/v1/completions", body(p)));
    std::string b;
    ASSERT_EQ(status_of(c.read_response(&b)), 200);
    bool done = false;
    solo[p] = stream_text(b, &done);
    ASSERT_TRUE(done);
    ASSERT_FALSE(solo[p].empty());
  }
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(s.server->port(), 120s));
    ASSERT_TRUE(clients.back()->send(http_request("POST", "/v1/completions", body(i % kPrompts))));
  }
  int gone = 0;
  for (int i = 0; i < kClients; i += 5) {  // 20%: leave after the first chunk
    if (clients[i]->read_until("data: ")) ++gone;
    if (i % 2) clients[i]->reset(); else clients[i]->close();
  }
  EXPECT_EQ(gone, (kClients + 4) / 5);
  int exact = 0, survivors = 0;
  for (int i = 0; i < kClients; ++i) {
    if (i % 5 == 0) continue;
    ++survivors;
    std::string b;
    if (status_of(clients[i]->read_response(&b)) != 200) continue;
    bool done = false;
    const std::string text = stream_text(b, &done);
    EXPECT_EQ(text, solo[i % kPrompts]) << "client " << i;
    exact += done && text == solo[i % kPrompts];
  }
  EXPECT_EQ(exact, survivors);
  // Drained: nothing running or waiting, no KV block, no Mamba slot.
  std::map<std::string, testing::PromFamily> fams;
  for (int tries = 0; tries < 200; ++tries) {
    RawClient c(s.server->port());
    c.send(http_request("GET", "/metrics", ""));
    std::string text;
    ASSERT_EQ(status_of(c.read_response(&text)), 200);
    fams = testing::parse_prometheus_text(text);
    if (testing::prom_value(fams, "vllm:num_requests_running") == 0 &&
        testing::prom_value(fams, "vllm:kv_cache_usage_perc") == 0)
      break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(testing::prom_value(fams, "vllm:num_requests_running"), 0);
  EXPECT_EQ(testing::prom_value(fams, "vllm:num_requests_waiting"), 0);
  EXPECT_EQ(testing::prom_value(fams, "vllm:kv_cache_usage_perc"), 0);
  EXPECT_EQ(testing::prom_value(fams, "strata:mamba_state_usage_perc"), 0);
  EXPECT_EQ(testing::prom_value(fams, "strata:server_requests_in_flight"), 0);
  EXPECT_GT(testing::prom_value(fams, "vllm:request_success_total", {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(s.server->requests_in_flight(), 0);
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

// `strata run-batch` on the demo model: one output line per input line, in order, with the
// Batch API's shape; the greedy completion equals the same request through the server.
TEST(ServerDemoModel, RunBatchWritesOneLinePerRequestInOrder) {
  const std::string dir = ::testing::TempDir();
  const std::string in = dir + "/batch_in.jsonl", out = dir + "/batch_out.jsonl";
  const json completion = {{"model", "demo"}, {"prompt", "Life is"}, {"max_tokens", 8},
                           {"temperature", 0}, {"ignore_eos", true}};
  {
    std::ofstream f(in);
    f << json{{"custom_id", "a"}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", completion}}.dump() << "\n";
    f << json{{"custom_id", "b"}, {"method", "POST"}, {"url", "/v1/chat/completions"},
              {"body", {{"model", "demo"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}}}}.dump() << "\n";
    f << json{{"custom_id", "c"}, {"method", "POST"}, {"url", "/v1/completions"},
              {"body", {{"prompt", "x"}, {"temperature", -1}}}}.dump() << "\n";
    f << "not json\n";
  }
  const std::string cmd = std::string(STRATA_BINARY) + " run-batch -i " + in + " -o " + out +
                          " --model " + testing::demo_model_dir() + " --served-model-name demo 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::vector<json> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(json::parse(l));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["custom_id"], "a");
  EXPECT_EQ(lines[0]["response"]["status_code"], 200);
  EXPECT_TRUE(lines[0]["error"].is_null());
  EXPECT_EQ(lines[0]["response"]["body"]["usage"]["completion_tokens"], 8);
  EXPECT_EQ(lines[1]["custom_id"], "b");
  EXPECT_EQ(lines[1]["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(lines[2]["custom_id"], "c");
  EXPECT_EQ(lines[2]["response"]["status_code"], 400);
  EXPECT_FALSE(lines[2]["error"].is_null());
  EXPECT_EQ(lines[3]["response"]["status_code"], 400);
  // The same completion through the server.
  DemoServer s(8);
  RawClient c(s.server->port(), 60s);
  c.send(http_request("POST", "/v1/completions", completion.dump()));
  std::string body;
  ASSERT_EQ(status_of(c.read_response(&body)), 200);
  EXPECT_EQ(json::parse(body)["choices"][0]["text"], lines[0]["response"]["body"]["choices"][0]["text"]);
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

// `strata localai` as LocalAI starts it (a process with --addr), driven by a client built from
// the same proto: Health before a model, LoadModel of the demo directory with LocalAI options,
// Predict equal to the same greedy completion through the OpenAI server, then SIGTERM.
TEST(ServerDemoModel, LocalAIBackendProcessLoadsAndPredicts) {
  const std::string dir = ::testing::TempDir();
  const std::string log = dir + "/localai.log", pidfile = dir + "/localai.pid";
  std::remove(log.c_str());
  const std::string cmd = std::string(STRATA_BINARY) + " localai --addr 127.0.0.1:0 > " + log +
                          " 2>&1 & echo $! > " + pidfile;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = text.find("(port ");
    if (at != std::string::npos) port = std::atoi(text.c_str() + at + 6);
    else std::this_thread::sleep_for(50ms);
  }
  ASSERT_GT(port, 0) << "strata localai did not start";
  auto stub = backend::Backend::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                            grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext c;
    backend::Reply r;
    ASSERT_TRUE(stub->Health(&c, backend::HealthMessage{}, &r).ok());
    EXPECT_EQ(r.message(), "OK");
  }
  {
    grpc::ClientContext c;
    backend::ModelOptions o;
    o.set_modelfile(testing::demo_model_dir());
    o.set_contextsize(256);
    o.add_options("max_num_seqs:4");
    o.add_options("served_model_name:demo");
    backend::Result r;
    ASSERT_TRUE(stub->LoadModel(&c, o, &r).ok());
    ASSERT_TRUE(r.success()) << r.message();
  }
  backend::PredictOptions p;
  p.set_prompt("Life is");
  p.set_tokens(8);
  p.set_ignoreeos(true);
  grpc::ClientContext c;
  backend::Reply reply;
  ASSERT_TRUE(stub->Predict(&c, p, &reply).ok());
  EXPECT_EQ(reply.tokens(), 8);
  // The same request through the OpenAI server on the same model.
  DemoServer s(4);
  RawClient http(s.server->port(), 60s);
  http.send(http_request("POST", "/v1/completions",
                         json{{"prompt", "Life is"}, {"max_tokens", 8}, {"temperature", 0},
                              {"ignore_eos", true}}.dump()));
  std::string body;
  ASSERT_EQ(status_of(http.read_response(&body)), 200);
  EXPECT_EQ(reply.message(), json::parse(body)["choices"][0]["text"].get<std::string>());
  std::ifstream pid(pidfile);
  long p_id = 0;
  pid >> p_id;
  ASSERT_GT(p_id, 0);
  EXPECT_EQ(::kill(static_cast<pid_t>(p_id), SIGTERM), 0);
}

}  // namespace
}  // namespace strata::server
