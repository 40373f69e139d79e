// The malformed-request matrix (spec/reliability.md section 6, test 1, and transport limits,
// test 3) against the whole server (transport, protocol layer, scripted engine): bad JSON,
// wrong types, huge numbers, out-of-range values, invalid UTF-8, lone surrogates, deep nesting,
// bad token ids, context overflow, bad tools, plus raw-socket cases (truncated bodies, slow
// senders, oversized bodies and headers, bad framing). Every case must get a 4xx with an
// OpenAI error body of at most 8 KB naming its own status; zero 5xx; the server keeps answering
// and a valid request afterwards gives the same bytes as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "raw_client.h"
#include "server_harness.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;
using testing::http_request;
using testing::RawClient;
using testing::status_of;

struct Case {
  std::string path, body;
};

std::vector<Case> json_cases() {
  const std::string c = "/v1/completions", ch = "/v1/chat/completions";
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  std::string deep_arrays(5000, '[');
  std::string long_prompt = "[";
  for (int i = 0; i < 1024; ++i) long_prompt += (i ? "," : "") + std::to_string(300 + i % 100);
  long_prompt += "]";
  std::string near_full = "[";
  for (int i = 0; i < 1000; ++i) near_full += (i ? "," : "") + std::to_string(300 + i % 100);
  near_full += "]";
  return {
      // Not JSON, or not an object.
      {c, "{"}, {c, R"({"prompt":})"}, {c, "nul"}, {c, ""}, {c, R"({"prompt":"x",})"},
      {c, R"({"prompt":"x"} trailing)"}, {c, R"("x")"}, {c, "[]"}, {c, "42"}, {c, "null"},
      {c, "true"}, {ch, "[1,2]"}, {c, deep_arrays}, {c, R"({"prompt":"x","a":)" + deep_arrays + "}"},
      // Wrong types.
      {c, R"({"prompt":5})"}, {c, R"({"prompt":{}})"}, {c, R"({"prompt":"x","max_tokens":"10"})"},
      {c, R"({"prompt":"x","max_tokens":1.5})"}, {c, R"({"prompt":"x","temperature":"abc"})"},
      {c, R"({"prompt":"x","n":"2"})"}, {c, R"({"prompt":"x","stream":"yes"})"},
      {c, R"({"prompt":"x","stop":5})"}, {c, R"({"prompt":"x","stop":[1]})"},
      {c, R"({"prompt":"x","logprobs":"x"})"}, {c, R"({"prompt":"x","seed":"x"})"},
      {c, R"({"prompt":[1,"a"]})"}, {c, R"({"prompt":[[1],[2,"b"]]})"},
      {ch, R"({"messages":"hi"})"}, {ch, R"({"messages":[1]})"}, {ch, R"({"messages":[{"role":5,"content":"x"}]})"},
      {ch, R"({"messages":[{"content":"x"}]})"}, {ch, R"({"messages":[{"role":"wizard","content":"x"}]})"},
      {ch, R"({"messages":[{"role":"user","content":5}]})"}, {ch, R"({"messages":[]})"}, {ch, R"({})"},
      // Huge numbers and out-of-range values.
      {c, R"({"prompt":"x","max_tokens":1e309})"}, {c, R"({"prompt":"x","max_tokens":99999999999999999999})"},
      {c, R"({"prompt":"x","n":1000000000})"}, {c, R"({"prompt":"x","seed":1e30})"},
      {c, R"({"prompt":"x","temperature":1e400})"}, {c, R"({"prompt":"x","top_k":100000000000000000000})"},
      {c, R"({"prompt":"x","logprobs":1000000})"}, {ch, "{" + msgs + R"(,"logprobs":true,"top_logprobs":1000})"},
      {c, R"({"prompt":"x","temperature":-1})"}, {c, R"({"prompt":"x","top_p":0})"},
      {c, R"({"prompt":"x","top_p":1.5})"}, {c, R"({"prompt":"x","top_k":-2})"},
      {c, R"({"prompt":"x","min_p":2})"}, {c, R"({"prompt":"x","presence_penalty":3})"},
      {c, R"({"prompt":"x","frequency_penalty":-3})"}, {c, R"({"prompt":"x","repetition_penalty":0})"},
      {c, R"({"prompt":"x","n":0})"}, {c, R"({"prompt":"x","max_tokens":-1})"},
      // Token ids and strings the vocabulary refuses.
      {c, R"({"prompt":[-1]})"}, {c, R"({"prompt":[999999]})"}, {c, R"({"prompt":"x","logit_bias":{"999999":1}})"},
      {c, R"({"prompt":"x","logit_bias":{"abc":1}})"}, {c, R"({"prompt":"x","stop_token_ids":[-5]})"},
      {c, R"({"prompt":""})"}, {c, R"({"prompt":[]})"}, {c, R"({"prompt":"x","stop":[""]})"},
      {c, "{\"prompt\":\"\xff\xfe bad utf-8\"}"}, {c, R"({"prompt":"\ud800 lone surrogate"})"},
      {ch, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}"},
      // Model, context and option combinations.
      {c, R"({"model":"nope","prompt":"x"})"}, {c, R"({"prompt":)" + long_prompt + "}"},
      {c, R"({"prompt":)" + near_full + R"(,"max_tokens":100})"},
      {c, R"({"prompt":"x","stream_options":{"include_usage":true}})"},
      {ch, "{" + msgs + R"(,"tool_choice":"auto"})"}, {ch, "{" + msgs + R"(,"tools":[]})"},
      {ch, "{" + msgs + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})"},
      {ch, "{" + msgs + R"(,"tools":[{"type":"function"}]})"},
      {ch, "{" + msgs + R"(,"add_generation_prompt":true,"continue_final_message":true})"},
      {ch, "{" + msgs + R"(,"top_logprobs":2})"},
  };
}

// Checks one answer: 4xx, OpenAI error body naming the status, at most 8 KB.
void expect_client_error(const std::string& response, const std::string& body, const std::string& what) {
  const int status = status_of(response);
  EXPECT_GE(status, 400) << what;
  EXPECT_LT(status, 500) << what << "\n" << body;
  EXPECT_LE(body.size(), 8192u) << what;
  auto j = nlohmann::json::parse(body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << what << ": " << body.substr(0, 200);
  ASSERT_TRUE(j.contains("error")) << what;
  EXPECT_TRUE(j["error"]["message"].is_string()) << what;
  EXPECT_EQ(j["error"]["code"], status) << what;
}

TEST(MalformedRequests, EveryCaseIsA4xxAndTheServerKeepsAnsweringTheSame) {
  testing::HarnessOptions o;
  o.server.limits.max_body_bytes = 1 << 20;
  o.server.limits.max_header_bytes = 8192;
  // Long enough that a loaded CI machine never trips it between the keep-alive cases; the
  // truncated-body and slow-sender cases still get their 408 well within the 5 s read timeout.
  o.server.limits.request_timeout = 2s;
  testing::ServerHarness h(o);
  const std::string valid = R"({"prompt":[1,400,401],"max_tokens":6,"temperature":0})";
  std::string baseline;
  {
    RawClient c(h.port());
    c.send(http_request("POST", "/v1/completions", valid));
    std::string body;
    ASSERT_EQ(status_of(c.read_response(&body)), 200);
    baseline = nlohmann::json::parse(body)["choices"].dump();
  }
  int cases = 0;
  // JSON-level cases, all on one keep-alive connection where the server keeps it open.
  auto conn = std::make_unique<RawClient>(h.port());
  for (const auto& k : json_cases()) {
    if (!conn->send(http_request("POST", k.path, k.body))) {
      conn = std::make_unique<RawClient>(h.port());
      ASSERT_TRUE(conn->send(http_request("POST", k.path, k.body)));
    }
    std::string body;
    const std::string r = conn->read_response(&body);
    // No answer at all: stop here rather than wait out every later case on a stuck connection.
    ASSERT_NE(status_of(r), -1) << "no answer within 10 s to case " << cases << ": " << k.path
                                << " " << k.body.substr(0, 120);
    expect_client_error(r, body, k.path + " " + k.body.substr(0, 120));
    if (r.find("Connection: close") != std::string::npos) conn = std::make_unique<RawClient>(h.port());
    ++cases;
  }
  // Raw transport cases, each on a fresh connection.
  const std::vector<std::pair<std::string, std::string>> raw = {
      {"oversized body", http_request("POST", "/v1/completions", std::string((1 << 20) + 10, ' '))},
      {"oversized header", http_request("POST", "/v1/completions", valid, "X-Big: " + std::string(20000, 'a') + "\r\n")},
      {"wrong method", http_request("GET", "/v1/completions", "")},
      {"unknown route", http_request("POST", "/v1/complete", valid)},
      {"no body", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"},
      {"bad chunking", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
      {"bad content-length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"},
      {"garbage request line", "\x01\x02\x03 / HTTP/1.1\r\n\r\n"},
      {"truncated body (408)", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":"},
      {"json in chunks, truncated", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n0\r\n\r\n"},
  };
  for (const auto& [what, bytes] : raw) {
    RawClient c(h.port(), 5s);
    c.send(bytes);
    std::string body;
    const std::string r = c.read_response(&body);
    expect_client_error(r, body, what);
    ++cases;
  }
  // A slow sender (1 byte per 50 ms) is cut off with 408 within the deadline.
  {
    RawClient c(h.port(), 5s);
    const std::string req = http_request("POST", "/v1/completions", valid);
    for (size_t i = 0; i < 20 && c.send(req.substr(i, 1)); ++i) std::this_thread::sleep_for(50ms);
    std::string body;
    expect_client_error(c.read_response(&body), body, "slow sender");
    ++cases;
  }
  // A client that sends half a request and vanishes: nothing to answer, nothing may break.
  for (int i = 0; i < 5; ++i) {
    RawClient c(h.port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"pro");
    c.reset();
    ++cases;
  }
  EXPECT_GE(cases, 60);
  std::printf("malformed cases sent: %d\n", cases);
  // Nothing reached the engine, and the server still answers the same.
  EXPECT_EQ(h.engine().stats().prompt_tokens, 3);
  RawClient c(h.port());
  c.send(http_request("POST", "/v1/completions", valid));
  std::string body;
  ASSERT_EQ(status_of(c.read_response(&body)), 200);
  EXPECT_EQ(nlohmann::json::parse(body)["choices"].dump(), baseline);
  EXPECT_EQ(h.server().requests_in_flight(), 0);
}

}  // namespace
}  // namespace strata::server
