// tool_choice "required" and named functions through the server (scripted engine writing the
// JSON a guided engine would) and the guided tool-call extractor on its own: calls parsed
// from the output, vLLM's finish reasons ("tool_calls" for required, "stop" for named), and
// streamed deltas (name first, then argument pieces) that concatenate to the non-streamed
// calls. The grammar itself is covered by tests/text and tests/engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "raw_client.h"
#include "server/guided_tool_calls.h"
#include "server_harness.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::http_request;
using testing::RawClient;
using testing::ServerHarness;
using testing::status_of;

const char* kRequired =
    R"([{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, {"x": "}]"}]}}, )"
    R"({"parameters":{},"name":"now"}])";

// Streams `text` cut at every `step` bytes; returns the calls the deltas concatenate to.
std::vector<ToolCall> streamed(std::optional<std::string> named, const std::string& text,
                               size_t step, int* headers) {
  GuidedToolCalls g(named);
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < text.size(); i += step)
    for (ToolCallDelta& d : g.push(std::string_view(text).substr(i, step))) {
      if (d.header) {
        EXPECT_EQ(d.index, static_cast<int32_t>(calls.size()));
        calls.push_back(*d.header);
        ++*headers;
      }
      EXPECT_LT(d.index, static_cast<int32_t>(calls.size()));
      if (d.index < static_cast<int32_t>(calls.size()))
        calls[static_cast<size_t>(d.index)].arguments += d.arguments;
    }
  return calls;
}

TEST(GuidedToolCalls, RequiredArrayGivesOneCallPerElementInAnyKeyOrder) {
  const auto calls = GuidedToolCalls::parse(std::nullopt, kRequired);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(calls[0].arguments),
            json::parse(R"({"city": "Paris", "days": [1, {"x": "}]"}]})"));
  EXPECT_EQ(calls[1].name, "now");
  EXPECT_EQ(calls[1].arguments, "{}");
  int compared = 0;
  for (size_t step : {1, 2, 3, 7, 1000}) {
    int headers = 0;
    const auto s = streamed(std::nullopt, kRequired, step, &headers);
    ASSERT_EQ(s.size(), calls.size()) << step;
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].name, calls[i].name);
      EXPECT_EQ(s[i].arguments, calls[i].arguments) << "step " << step;
      ++compared;
    }
    EXPECT_EQ(headers, 2);
  }
  EXPECT_EQ(compared, 10);
}

TEST(GuidedToolCalls, NamedCallIsTheWholeOutputWithTheNameFirst) {
  const std::string text = R"({"city": "Oslo"})";
  const auto calls = GuidedToolCalls::parse("get_weather", text);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, text);
  GuidedToolCalls g("get_weather");
  auto first = g.push("{\"ci");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].header.has_value());
  EXPECT_EQ(first[0].header->name, "get_weather");
  EXPECT_EQ(first[0].arguments, "{\"ci");
  auto second = g.push("ty\"");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_FALSE(second[0].header.has_value());
  EXPECT_EQ(second[0].arguments, "ty\"");
}

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}}}},
       {"type": "function", "function": {"name": "now"}}])";

struct Answer {
  json body;                 // non-streamed
  std::vector<json> chunks;  // streamed
};

Answer ask(const std::string& script, const std::string& tool_choice) {
  testing::HarnessOptions o;
  o.engine.script = script;
  ServerHarness h(o);
  RawClient c(h.port());
  const std::string base = R"({"model":"demo","messages":[{"role":"user","content":"hi"}],)"
                           R"("max_tokens":200,"tools":)" +
                           std::string(kTools) + R"(,"tool_choice":)" + tool_choice;
  Answer a;
  std::string body;
  c.send(http_request("POST", "/v1/chat/completions", base + "}"));
  EXPECT_EQ(status_of(c.read_response(&body)), 200) << body;
  a.body = json::parse(body);
  c.send(http_request("POST", "/v1/chat/completions", base + R"(,"stream":true})"));
  EXPECT_EQ(status_of(c.read_response(&body)), 200) << body;
  size_t pos = 0;
  while ((pos = body.find("data: {", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    a.chunks.push_back(json::parse(body.substr(pos + 6, end - pos - 6)));
    pos = end;
  }
  return a;
}

// The streamed tool-call deltas accumulated as OpenAI clients do; the finish reason too.
json accumulate(const std::vector<json>& chunks, std::string* finish, int* name_deltas) {
  json calls = json::array();
  for (const json& ch : chunks) {
    const json& choice = ch["choices"][0];
    if (!choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    EXPECT_FALSE(choice["delta"].contains("content") && choice["delta"]["content"] != "")
        << "guided output must not stream as content";
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const json& d : choice["delta"]["tool_calls"]) {
      const size_t i = d["index"];
      if (d.contains("id")) {
        EXPECT_EQ(i, calls.size());
        calls.push_back({{"id", d["id"]},
                         {"type", "function"},
                         {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
        ++*name_deltas;
      }
      calls[i]["function"]["arguments"] = calls[i]["function"]["arguments"].get<std::string>() +
                                          d["function"]["arguments"].get<std::string>();
    }
  }
  return calls;
}

// The streamed answer's tool calls, accumulated, equal the non-streamed `calls`; it finished
// with `finish` and named each call once.
void expect_stream_equals(const std::vector<json>& chunks, const json& calls,
                          const std::string& finish) {
  std::string streamed_finish;
  int names = 0;
  const json streamed = accumulate(chunks, &streamed_finish, &names);
  EXPECT_EQ(streamed_finish, finish);
  EXPECT_EQ(names, static_cast<int>(calls.size()));
  ASSERT_EQ(streamed.size(), calls.size());
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i]["function"]["name"], calls[i]["function"]["name"]);
    EXPECT_EQ(streamed[i]["function"]["arguments"], calls[i]["function"]["arguments"]);
    EXPECT_EQ(streamed[i]["type"], "function");
  }
}

TEST(GuidedToolCalls, RequiredThroughTheServerStreamingAndNot) {
  const Answer a = ask(kRequired, R"("required")");
  const json& msg = a.body["choices"][0]["message"];
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["content"], "");
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"],
            "Paris");
  EXPECT_EQ(msg["tool_calls"][1]["function"]["name"], "now");
  expect_stream_equals(a.chunks, msg["tool_calls"], "tool_calls");  // two calls, two names
}

TEST(GuidedToolCalls, NamedThroughTheServerStreamingAndNot) {
  // ASCII: the scripted engine decodes token by token (a split character would not survive).
  const std::string args = R"({"city": "Oslo", "days": [1, 2]})";
  const Answer a = ask(args, R"({"type":"function","function":{"name":"get_weather"}})");
  const json& msg = a.body["choices"][0]["message"];
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "stop");  // vLLM: a named call keeps "stop"
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], args);
  expect_stream_equals(a.chunks, msg["tool_calls"], "stop");
  // The arguments arrived in more than one piece (the scripted engine sends a token a step).
  int pieces = 0;
  for (const json& ch : a.chunks)
    if (ch["choices"][0]["delta"].contains("tool_calls")) ++pieces;
  EXPECT_GT(pieces, 1);
}

}  // namespace
}  // namespace strata::server
