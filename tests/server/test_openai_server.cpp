// The OpenAI server over the transport with a scripted engine: answers and streams built from
// engine outputs, the API key, the waiting-queue 503, /metrics parsed strictly, and the
// disconnect storm (512 streams, 20% reset mid-stream: every aborted request leaves the engine,
// survivors get exactly their expected tokens).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "prometheus_text.h"
#include "raw_client.h"
#include "server_harness.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::http_request;
using testing::RawClient;
using testing::ServerHarness;
using testing::status_of;

// The JSON payloads of an SSE body ("data: ...\n\n" events); "[DONE]" as the string.
std::vector<json> sse_payloads(const std::string& body, bool* saw_done = nullptr) {
  std::vector<json> out;
  size_t pos = 0;
  if (saw_done) *saw_done = false;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      if (saw_done) *saw_done = true;
      continue;
    }
    out.push_back(json::parse(data));
  }
  return out;
}

std::string ids_json(const std::vector<int32_t>& ids) { return json(ids).dump(); }

std::string expected_text(ServerHarness& h, const std::vector<int32_t>& prompt, int64_t n) {
  std::string text;
  for (int32_t id : h.engine().expected_ids(prompt, 0, n))
    text += h.tokenizer().decode(std::vector<int32_t>{id}, true);
  return text;
}

void wait_until(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!cond() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
}

TEST(OpenAIServer, CompletionWithTokenIdPromptReturnsTheEngineText) {
  ServerHarness h;
  RawClient c(h.port());
  const std::vector<int32_t> prompt = {1, 300, 301, 302};
  c.send(http_request("POST", "/v1/completions",
                      R"({"model":"demo","prompt":)" + ids_json(prompt) +
                          R"(,"max_tokens":7,"temperature":0})"));
  std::string body;
  ASSERT_EQ(status_of(c.read_response(&body)), 200) << body;
  json j = json::parse(body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], expected_text(h, prompt, 7));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
}

TEST(OpenAIServer, StreamingSendsChunksThenUsageThenDone) {
  ServerHarness h;
  RawClient c(h.port());
  const std::vector<int32_t> prompt = {1, 500, 501};
  c.send(http_request("POST", "/v1/completions",
                      R"({"prompt":)" + ids_json(prompt) +
                          R"(,"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}})"));
  std::string body;
  std::string head = c.read_response(&body);
  ASSERT_EQ(status_of(head), 200);
  EXPECT_NE(head.find("text/event-stream"), std::string::npos);
  bool done = false;
  auto events = sse_payloads(body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 2u);
  std::string text;
  int finishes = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i]["choices"].size(), 1u);
    text += events[i]["choices"][0]["text"].get<std::string>();
    if (!events[i]["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(text, expected_text(h, prompt, 5));
  EXPECT_EQ(finishes, 1);
  const json& usage = events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
}

TEST(OpenAIServer, ChatCompletionAnswersAndStreams) {
  ServerHarness h;
  RawClient c(h.port());
  const std::string req =
      R"({"model":"demo","messages":[{"role":"user","content":"hello"}],"max_tokens":4})";
  c.send(http_request("POST", "/v1/chat/completions", req));
  std::string body;
  ASSERT_EQ(status_of(c.read_response(&body)), 200) << body;
  json j = json::parse(body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  const std::string sreq =
      R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":4,"stream":true})";
  c.send(http_request("POST", "/v1/chat/completions", sreq));
  ASSERT_EQ(status_of(c.read_response(&body)), 200);
  bool done = false;
  auto events = sse_payloads(body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
}

TEST(OpenAIServer, ApiKeyGuardsTheApiButNotHealthOrMetrics) {
  testing::HarnessOptions o;
  o.server.api_key = "sk-test-123";
  ServerHarness h(o);
  RawClient c(h.port());
  std::string body;
  for (const char* auth : {"", "Authorization: Bearer sk-test-12\r\n",
                           "Authorization: Bearer sk-test-1234\r\n", "Authorization: sk-test-123\r\n",
                           "Authorization: Basic sk-test-123\r\n"}) {
    c.send(http_request("GET", "/v1/models", "", auth));
    EXPECT_EQ(status_of(c.read_response(&body)), 401) << auth;
    EXPECT_EQ(json::parse(body)["error"]["code"], 401);
    c.send(http_request("POST", "/tokenize", R"({"prompt":"x"})", auth));
    EXPECT_EQ(status_of(c.read_response()), 401) << auth;
  }
  c.send(http_request("GET", "/v1/models", "", "Authorization: Bearer sk-test-123\r\n"));
  ASSERT_EQ(status_of(c.read_response(&body)), 200);
  EXPECT_EQ(json::parse(body)["data"][0]["id"], "demo");
  for (const char* open : {"/health", "/version", "/metrics"}) {
    c.send(http_request("GET", open, ""));
    EXPECT_EQ(status_of(c.read_response()), 200) << open;
  }
}

TEST(OpenAIServer, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

class FullQueue : public ::testing::TestWithParam<bool> {};

// Both ways an engine may refuse: submit() returning false, or a finished output with the
// error (engine::AsyncEngine).
TEST_P(FullQueue, Is503AndTheServerRecovers) {
  testing::HarnessOptions o;
  o.engine.refuse_with_output = GetParam();
  o.engine.max_running = 1;
  o.engine.max_waiting = 1;
  o.engine.step_interval = 20ms;
  ServerHarness h(o);
  // One runs, one waits, the third is refused.
  std::vector<std::unique_ptr<RawClient>> cs;
  for (int i = 0; i < 2; ++i) {
    cs.push_back(std::make_unique<RawClient>(h.port()));
    cs.back()->send(http_request("POST", "/v1/completions", R"({"prompt":[1,2,3],"max_tokens":10})"));
    wait_until([&] { return h.engine().live_requests() == i + 1 &&
                            (i == 0 ? h.engine().stats().running == 1 : true); });
  }
  RawClient third(h.port());
  third.send(http_request("POST", "/v1/completions", R"({"prompt":[1,2,3],"max_tokens":10})"));
  std::string body;
  EXPECT_EQ(status_of(third.read_response(&body)), 503);
  EXPECT_EQ(json::parse(body)["error"]["code"], 503);
  for (auto& c : cs) EXPECT_EQ(status_of(c->read_response()), 200);
  third.send(http_request("POST", "/v1/completions", R"({"prompt":[1,2,3],"max_tokens":2})"));
  EXPECT_EQ(status_of(third.read_response()), 200);
}
INSTANTIATE_TEST_SUITE_P(OpenAIServer, FullQueue, ::testing::Bool());

TEST(OpenAIServer, MetricsParseStrictlyWithVllmNamesAndCounts) {
  ServerHarness h;
  RawClient c(h.port());
  for (int i = 0; i < 3; ++i) {
    c.send(http_request("POST", "/v1/completions", R"({"prompt":[1,2,3,4],"max_tokens":6})"));
    ASSERT_EQ(status_of(c.read_response()), 200);
  }
  std::string text;
  c.send(http_request("GET", "/metrics", ""));
  ASSERT_EQ(status_of(c.read_response(&text)), 200);
  auto fams = testing::parse_prometheus_text(text);
  const std::map<std::string, std::string> l = {{"model_name", "demo"}, {"engine", "0"}};
  for (const char* gauge : {"vllm:num_requests_running", "vllm:num_requests_waiting",
                            "vllm:kv_cache_usage_perc", "strata:mamba_state_usage_perc"}) {
    ASSERT_TRUE(fams.count(gauge)) << gauge;
    EXPECT_EQ(fams[gauge].type, "gauge") << gauge;
  }
  for (const char* counter : {"vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                              "vllm:num_preemptions_total", "vllm:request_success_total"}) {
    ASSERT_TRUE(fams.count(counter)) << counter;
    EXPECT_EQ(fams[counter].type, "counter") << counter;
  }
  for (const char* hist : {"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                           "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"}) {
    ASSERT_TRUE(fams.count(hist)) << hist;
    EXPECT_EQ(fams[hist].type, "histogram") << hist;
  }
  EXPECT_EQ(testing::prom_value(fams, "vllm:prompt_tokens_total", l), 12);
  EXPECT_EQ(testing::prom_value(fams, "vllm:generation_tokens_total", l), 18);
  EXPECT_EQ(testing::prom_value(fams, "vllm:request_success_total",
                                {{"finished_reason", "length"}}),
            3);
  EXPECT_EQ(testing::prom_value(fams, "vllm:time_to_first_token_seconds_count", l), 3);
  EXPECT_EQ(testing::prom_value(fams, "vllm:e2e_request_latency_seconds_count", l), 3);
  // 6 tokens, one per step: 5 gaps per request.
  EXPECT_EQ(testing::prom_value(fams, "vllm:inter_token_latency_seconds_count", l), 15);
  EXPECT_EQ(testing::prom_value(fams, "vllm:num_requests_running", l), 0);
  EXPECT_EQ(testing::prom_value(fams, "vllm:kv_cache_usage_perc", l), 0);
}

TEST(OpenAIServer, DisconnectStormAbortsTheGoneAndLeavesSurvivorsExact) {
  testing::HarnessOptions o;
  o.engine.max_running = 128;
  o.engine.step_interval = 2ms;
  o.server.io_threads = 2;
  ServerHarness h(o);
  constexpr int kClients = 512;
  constexpr int64_t kTokens = 24;
  std::mt19937 rng(7);
  struct Client {
    std::unique_ptr<RawClient> c;
    std::vector<int32_t> prompt;
    bool leave = false;
  };
  std::vector<Client> clients(kClients);
  for (int i = 0; i < kClients; ++i) {
    auto& cl = clients[i];
    cl.prompt = {1, 16 + i % 3000, 16 + (i * 7) % 3000, 16 + (i * 13) % 3000};
    cl.leave = i % 5 == 0;  // 20%
    cl.c = std::make_unique<RawClient>(h.port(), 30s);
    ASSERT_TRUE(cl.c->connected());
    ASSERT_TRUE(cl.c->send(http_request(
        "POST", "/v1/completions",
        R"({"prompt":)" + ids_json(cl.prompt) + R"(,"max_tokens":)" + std::to_string(kTokens) +
            R"(,"temperature":0,"stream":true})")));
  }
  // The leavers go once their stream started (mid-stream), with a reset or a close.
  int left = 0;
  for (int i = 0; i < kClients; ++i) {
    auto& cl = clients[i];
    if (!cl.leave) continue;
    if (cl.c->read_until("data: ")) ++left;
    if (i % 2) cl.c->reset(); else cl.c->close();
  }
  EXPECT_EQ(left, kClients / 5 + 1);
  int exact = 0;
  for (auto& cl : clients) {
    if (cl.leave) continue;
    std::string body;
    if (status_of(cl.c->read_response(&body)) != 200) continue;
    bool done = false;
    std::string text;
    for (const auto& e : sse_payloads(body, &done))
      if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
    if (done && text == expected_text(h, cl.prompt, kTokens)) ++exact;
  }
  EXPECT_EQ(exact, kClients - (kClients / 5 + 1));
  wait_until([&] { return h.engine().live_requests() == 0 && h.server().requests_in_flight() == 0; });
  EXPECT_EQ(h.engine().live_requests(), 0);
  EXPECT_EQ(h.server().requests_in_flight(), 0);
  EXPECT_EQ(h.engine().stats().kv_usage, 0.0);
  // Some leavers may have finished before their reset landed; most must have been aborted.
  EXPECT_GT(h.engine().aborted(), 0);
  // Still answering.
  RawClient after(h.port());
  after.send(http_request("GET", "/health", ""));
  EXPECT_EQ(status_of(after.read_response()), 200);
}

TEST(OpenAIServer, NothingIsStreamedBeforeTheFirstTokenExists) {
  testing::HarnessOptions o;
  o.engine.step_interval = 300ms;  // the first token comes one step after admission
  ServerHarness h(o);
  RawClient c(h.port(), 5s);
  const auto t0 = std::chrono::steady_clock::now();
  c.send(http_request("POST", "/v1/chat/completions",
                      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true})"));
  ASSERT_TRUE(c.read_until("data: "));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  c.read_response();
}

TEST(OpenAIServer, ADisconnectedStreamIsAbortedWithinOneEngineStep) {
  testing::HarnessOptions o;
  o.engine.step_interval = 50ms;
  ServerHarness h(o);
  RawClient c(h.port(), 5s);
  c.send(http_request("POST", "/v1/completions",
                      R"({"prompt":[1,2,3],"max_tokens":500,"stream":true,"ignore_eos":true})"));
  ASSERT_TRUE(c.read_until("data: "));
  ASSERT_EQ(h.engine().live_requests(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  c.reset();
  wait_until([&] { return h.engine().live_requests() == 0; }, 2s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(h.engine().live_requests(), 0);
  EXPECT_EQ(h.engine().aborted(), 1);
  EXPECT_LT(took, 50ms + 100ms) << "one step plus 100 ms";
  wait_until([&] { return h.server().requests_in_flight() == 0; });
  EXPECT_EQ(h.server().requests_in_flight(), 0);
}

TEST(OpenAIServer, ShutdownAbortsInFlightStreamsAndEndsThem) {
  testing::HarnessOptions o;
  o.engine.step_interval = 5ms;
  auto h = std::make_unique<ServerHarness>(o);
  RawClient c(h->port(), 10s);
  c.send(http_request("POST", "/v1/completions",
                      R"({"prompt":[1,2,3],"max_tokens":1000,"stream":true,"ignore_eos":true})"));
  ASSERT_TRUE(c.read_until("data: "));
  const auto t0 = std::chrono::steady_clock::now();
  h->server().shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(h->engine().live_requests(), 0);
  c.read_all();
  EXPECT_NE(c.received().find("\"abort\""), std::string::npos);
  EXPECT_NE(c.received().find("[DONE]"), std::string::npos);
}

}  // namespace
}  // namespace strata::server
