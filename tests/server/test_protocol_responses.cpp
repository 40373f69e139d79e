// The response builder driven by a simulated engine: parsed requests, real token ids from the
// demo tokenizer run through the real OutputProcessor, one token per completion per step. The
// JSON bodies and SSE streams are checked field by field against values computed here from the
// ids (tokenizer.decode, counts), and streams against the non-streaming body of the same run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/output_processor.h"
#include "protocol_test_util.h"
#include "server/openai_misc.h"
#include "server/openai_response.h"

namespace strata::server::testing {
namespace {

using json = nlohmann::ordered_json;
using engine::FinishReason;

// Per request, per completion: the ids the "model" samples (the processor may stop earlier).
using Script = std::vector<std::vector<std::vector<int32_t>>>;
using LogprobFn = std::function<engine::TokenLogprobs(int32_t id)>;

struct SimResult {
  std::vector<std::string> events;
  size_t outputs = 0;
};

SimResult simulate(const DemoServer& server, const ParsedRequest& parsed, ResponseBuilder& builder,
                   const Script& script, const std::vector<int32_t>& eos,
                   const LogprobFn& logprob = nullptr) {
  engine::OutputProcessor op(&server.tok, eos);
  for (const engine::EngineRequest& r : parsed.requests)
    op.add(r);
  SimResult res;
  // A prefill step first: outputs with no tokens produce nothing.
  for (const engine::EngineRequest& r : parsed.requests) {
    engine::RequestOutput empty;
    empty.request_id = r.id;
    empty.prompt_tokens = static_cast<int64_t>(r.prompt.size());
    const auto ev = builder.on_output(empty);
    EXPECT_TRUE(ev.empty()) << "an event before the first token";
  }
  std::vector<std::vector<bool>> done(parsed.requests.size());
  for (size_t r = 0; r < parsed.requests.size(); ++r)
    done[r].assign(static_cast<size_t>(parsed.plan.n), false);
  for (size_t step = 0;; ++step) {
    bool any = false;
    for (size_t r = 0; r < parsed.requests.size(); ++r) {
      const engine::EngineRequest& req = parsed.requests[r];
      engine::RequestOutput out;
      out.request_id = req.id;
      out.prompt_tokens = static_cast<int64_t>(req.prompt.size());
      bool all_done = true;
      for (int32_t k = 0; k < parsed.plan.n; ++k) {
        if (done[r][k]) continue;
        const auto& ids = script[r][static_cast<size_t>(k)];
        engine::CompletionDelta d;
        if (step < ids.size()) {
          engine::TokenLogprobs lp;
          if (logprob) lp = logprob(ids[step]);
          const FinishReason f = op.on_token(req.id, k, ids[step], logprob ? &lp : nullptr, &d);
          done[r][k] = f != FinishReason::None;
        } else {
          op.finish(req.id, k, FinishReason::Abort, &d);
          done[r][k] = true;
        }
        out.completions.push_back(d);
        all_done = all_done && done[r][k];
        any = true;
      }
      if (out.completions.empty()) continue;
      out.finished = all_done;
      ++res.outputs;
      auto ev = builder.on_output(out);
      res.events.insert(res.events.end(), ev.begin(), ev.end());
    }
    if (!any) break;
  }
  EXPECT_TRUE(builder.finished());
  if (parsed.plan.stream) {
    auto ev = builder.stream_end();
    res.events.insert(res.events.end(), ev.begin(), ev.end());
  }
  return res;
}

// The JSON payloads of an SSE stream; checks the framing and that it ends with [DONE].
std::vector<json> payloads(const std::vector<std::string>& events) {
  std::vector<json> out;
  EXPECT_FALSE(events.empty());
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& e = events[i];
    EXPECT_EQ(e.rfind("data: ", 0), 0u) << e;
    EXPECT_TRUE(e.ends_with("\n\n")) << e;
    const std::string data = e.substr(6, e.size() - 8);
    if (i + 1 == events.size()) {
      EXPECT_EQ(data, "[DONE]");
      break;
    }
    out.push_back(json::parse(data));
  }
  return out;
}

ParsedRequest parse(const DemoServer& s, const std::string& body, bool chat) {
  return ok(chat ? parse_chat_request(body, s.ctx) : parse_completion_request(body, s.ctx));
}

TEST(ProtocolResponses, CompletionBodyAndStreamAgree) {
  DemoServer server(256);
  const std::vector<int32_t> a = server.tok.encode(" the world is wide and round and old", false);
  const std::vector<int32_t> b = server.tok.encode(" a cookie is big too", false);
  const std::string body = R"({"prompt": "Hello", "n": 2, "max_tokens": 5, "stop": ["big"]})";
  // Completion 0 reaches max_tokens before "big"; completion 1 meets "big".
  ASSERT_EQ(server.tok.decode(std::vector<int32_t>(a.begin(), a.begin() + 5)).find("big"),
            std::string::npos);
  const Script script = {{a, b}};
  std::map<int, std::string> streamed;
  json usage;
  {
    const ParsedRequest p = parse(server, body, false);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, script, {2});
    const json j = builder.body();
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["id"], p.plan.id);
    EXPECT_EQ(j["model"], "demo");
    ASSERT_EQ(j["choices"].size(), 2u);
    const json& c0 = j["choices"][0];
    EXPECT_EQ(c0["index"], 0);
    EXPECT_EQ(c0["text"], server.tok.decode(std::vector<int32_t>(a.begin(), a.begin() + 5), true));
    EXPECT_EQ(c0["finish_reason"], "length");
    EXPECT_TRUE(c0["stop_reason"].is_null());
    EXPECT_TRUE(c0["logprobs"].is_null());
    EXPECT_FALSE(c0.contains("token_ids"));
    const json& c1 = j["choices"][1];
    EXPECT_EQ(c1["text"], " a cookie is ");
    EXPECT_EQ(c1["finish_reason"], "stop");
    EXPECT_EQ(c1["stop_reason"], "big");
    // The ids up to the one that completed "big".
    size_t used = 0;
    while (server.tok.decode(std::vector<int32_t>(b.begin(), b.begin() + used)).find("big") ==
           std::string::npos)
      ++used;
    const int64_t prompt_len = static_cast<int64_t>(server.tok.encode("Hello", true).size());
    EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_len);
    EXPECT_EQ(j["usage"]["completion_tokens"], 5 + static_cast<int64_t>(used));
    EXPECT_EQ(j["usage"]["total_tokens"], prompt_len + 5 + static_cast<int64_t>(used));
    streamed[0] = c0["text"];
    streamed[1] = c1["text"];
    usage = j["usage"];
  }
  {
    const ParsedRequest p =
        parse(server, R"({"prompt": "Hello", "n": 2, "max_tokens": 5, "stop": ["big"],
                                             "stream": true, "stream_options": {"include_usage": true}})",
              false);
    ResponseBuilder builder(p.plan, server.ctx);
    const SimResult r = simulate(server, p, builder, script, {2});
    const std::vector<json> chunks = payloads(r.events);
    std::map<int, std::string> text;
    std::map<int, int> finishes;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      const json& c = chunks[i];
      EXPECT_EQ(c["object"], "text_completion");
      EXPECT_EQ(c["id"], p.plan.id);
      ASSERT_EQ(c["choices"].size(), 1u);
      const json& ch = c["choices"][0];
      text[ch["index"].get<int>()] += ch["text"].get<std::string>();
      if (!ch["finish_reason"].is_null()) {
        ++finishes[ch["index"].get<int>()];
        EXPECT_TRUE(ch.contains("stop_reason"));
      }
    }
    EXPECT_EQ(text, streamed);
    EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
    const json& last = chunks.back();  // the usage chunk
    EXPECT_TRUE(last["choices"].is_array() && last["choices"].empty());
    EXPECT_EQ(last["usage"], usage);
  }
}

TEST(ProtocolResponses, ChatStreamStartsWithTheRoleAndCarriesReasoningAndToolCalls) {
  DemoServer server(512);
  server.ctx.reasoning_parser = "nano_v3";
  server.ctx.enable_auto_tool_choice = true;
  server.ctx.tool_call_parser = "nemotron_json";
  const std::string output =
      "Need the weather.</think><TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}]</TOOLCALL>";
  std::vector<int32_t> ids = server.tok.encode(output, false);
  ids.push_back(11);  // <|im_end|>
  const std::string req = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  {
    const ParsedRequest p = parse(server, req + "}", true);
    ASSERT_TRUE(p.plan.thinking_enabled);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, {{ids}}, {2, 11});
    const json j = builder.body();
    EXPECT_EQ(j["object"], "chat.completion");
    const json& msg = j["choices"][0]["message"];
    EXPECT_EQ(msg["role"], "assistant");
    EXPECT_TRUE(msg["content"].is_null());
    EXPECT_EQ(msg["reasoning"], "Need the weather.");
    EXPECT_EQ(msg["reasoning_content"], "Need the weather.");
    ASSERT_EQ(msg["tool_calls"].size(), 1u);
    const json& call = msg["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
              json({{"city", "Paris"}}));
    EXPECT_EQ(call["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());  // EOS
    EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(ids.size()));
  }
  {
    const ParsedRequest p = parse(server, req + R"(, "stream": true})", true);
    ResponseBuilder builder(p.plan, server.ctx);
    const SimResult r = simulate(server, p, builder, {{ids}}, {2, 11});
    const std::vector<json> chunks = payloads(r.events);
    ASSERT_GE(chunks.size(), 3u);
    const json& first = chunks[0]["choices"][0];
    EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
    EXPECT_EQ(first["delta"], json({{"role", "assistant"}, {"content", ""}}));
    std::string reasoning, content;
    json calls = json::array();
    int call_deltas = 0;
    json finish;
    for (size_t i = 1; i < chunks.size(); ++i) {
      const json& ch = chunks[i]["choices"][0];
      const json& d = ch["delta"];
      EXPECT_FALSE(d.contains("role"));
      if (d.contains("reasoning")) {
        reasoning += d["reasoning"].get<std::string>();
        EXPECT_EQ(d["reasoning_content"], d["reasoning"]);
      }
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("tool_calls"))
        for (const json& c : d["tool_calls"]) {
          // Accumulated as OpenAI clients do: the first delta of a call has its id, type and
          // name; later ones more of its arguments (nemotron_json streams them in pieces).
          const size_t at = c["index"];
          if (at == calls.size()) {
            calls.push_back(c);
            ++call_deltas;
            continue;
          }
          ASSERT_LT(at, calls.size());
          EXPECT_FALSE(c.contains("id"));
          calls[at]["function"]["arguments"] = calls[at]["function"]["arguments"].get<std::string>() +
                                               c["function"]["arguments"].get<std::string>();
          ++call_deltas;
        }
      if (!ch["finish_reason"].is_null()) {
        EXPECT_TRUE(finish.is_null()) << "two finishes";
        finish = ch["finish_reason"];
        EXPECT_EQ(i + 1, chunks.size()) << "the finish is the last chunk (no usage asked for)";
      }
    }
    EXPECT_EQ(reasoning, "Need the weather.");
    EXPECT_EQ(content, "");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]["index"], 0);
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
              json({{"city", "Paris"}}));
    EXPECT_GT(call_deltas, 1) << "the arguments stream in pieces, after the name";
    EXPECT_EQ(finish, "tool_calls");
  }
}

TEST(ProtocolResponses, ChatPlainContentStreamsAsDeltas) {
  DemoServer server(512);
  const std::vector<int32_t> ids = server.tok.encode("I'm a doctor, not a good man.", false);
  const ParsedRequest p =
      parse(server, R"({"messages": [{"role": "user", "content": "Tell me a fortune."}],
      "stream": true, "max_tokens": 100, "stream_options": {"include_usage": true, "continuous_usage_stats": true}})",
            true);
  ResponseBuilder builder(p.plan, server.ctx);
  std::vector<int32_t> with_eos = ids;
  with_eos.push_back(11);
  const SimResult r = simulate(server, p, builder, {{with_eos}}, {2, 11});
  const std::vector<json> chunks = payloads(r.events);
  std::string content;
  int64_t last_completion_tokens = -1;
  for (size_t i = 1; i + 1 < chunks.size(); ++i) {
    const json& ch = chunks[i]["choices"][0];
    if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
    // continuous_usage_stats: every chunk carries the running usage.
    const int64_t ct = chunks[i]["usage"]["completion_tokens"].get<int64_t>();
    EXPECT_GE(ct, last_completion_tokens);
    last_completion_tokens = ct;
  }
  EXPECT_EQ(content, server.tok.decode(ids, true));
  EXPECT_EQ(chunks[chunks.size() - 2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], static_cast<int64_t>(with_eos.size()));
}

TEST(ProtocolResponses, LogprobShapesPerEndpoint) {
  DemoServer server(256);
  const std::vector<int32_t> ids = server.tok.encode(" hello there", false);
  // A made-up distribution per token: the chosen one at -0.5 (or -inf for the last), two rivals.
  const LogprobFn lp = [&](int32_t id) {
    engine::TokenLogprobs t;
    t.token = id;
    t.logprob = id == ids.back() ? -std::numeric_limits<float>::infinity() : -0.5f;
    t.rank = 2;
    t.top = {{id + 1, -0.25f}, {id, t.logprob}, {id + 2, -3.f}};
    return t;
  };
  {
    const ParsedRequest p =
        parse(server, R"({"prompt": "x", "max_tokens": 16, "logprobs": 2})", false);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, {{ids}}, {}, lp);
    const json l = builder.body()["choices"][0]["logprobs"];
    ASSERT_EQ(l["tokens"].size(), ids.size());
    int64_t offset = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string tok = server.tok.decode(std::vector<int32_t>{ids[i]});
      EXPECT_EQ(l["tokens"][i], tok);
      EXPECT_EQ(l["text_offset"][i], offset);
      offset += static_cast<int64_t>(tok.size());  // ASCII: bytes = code points
      const double want = i + 1 == ids.size() ? -9999.0 : -0.5;
      EXPECT_DOUBLE_EQ(l["token_logprobs"][i].get<double>(), want);
      // The chosen token plus the top 2: {id+1, id} (id appears once).
      const json& top = l["top_logprobs"][i];
      EXPECT_EQ(top.size(), 2u);
      EXPECT_DOUBLE_EQ(top[server.tok.decode(std::vector<int32_t>{ids[i] + 1})].get<double>(),
                       -0.25);
      EXPECT_TRUE(top.contains(tok));
    }
  }
  {
    const ParsedRequest ids_only = parse(server, R"({"prompt": "x", "max_tokens": 16, "logprobs": 0,
                                                    "return_tokens_as_token_ids": true})",
                                         false);
    ResponseBuilder as_ids(ids_only.plan, server.ctx);
    simulate(server, ids_only, as_ids, {{ids}}, {}, lp);
    const json li = as_ids.body()["choices"][0]["logprobs"];
    EXPECT_EQ(li["tokens"][0], "token_id:" + std::to_string(ids[0]));
    EXPECT_EQ(li["top_logprobs"][0].size(), 1u);  // logprobs 0: the chosen token only
  }
  {
    const ParsedRequest p =
        parse(server, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 16,
                                             "logprobs": true, "top_logprobs": 3})",
              true);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, {{ids}}, {}, lp);
    const json l = builder.body()["choices"][0]["logprobs"];
    ASSERT_EQ(l["content"].size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const json& e = l["content"][i];
      const std::string tok = server.tok.decode(std::vector<int32_t>{ids[i]});
      EXPECT_EQ(e["token"], tok);
      ASSERT_EQ(e["bytes"].size(), tok.size());
      for (size_t k = 0; k < tok.size(); ++k)
        EXPECT_EQ(e["bytes"][k], static_cast<unsigned char>(tok[k]));
      ASSERT_EQ(e["top_logprobs"].size(), 3u);
      EXPECT_DOUBLE_EQ(e["top_logprobs"][0]["logprob"].get<double>(), -0.25);
      EXPECT_EQ(e["top_logprobs"][2]["token"], server.tok.decode(std::vector<int32_t>{ids[i] + 2}));
    }
  }
}

TEST(ProtocolResponses, StopReasonTokenIdsAbortErrorsAndBatches) {
  DemoServer server(256);
  const std::vector<int32_t> ids = server.tok.encode(" one two three four", false);
  {  // A stop id: stop_reason is the integer; return_token_ids adds the ids.
    const ParsedRequest p = parse(
        server,
        json({{"prompt", {5, 6}}, {"stop_token_ids", {ids[2]}}, {"return_token_ids", true}}).dump(),
        false);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, {{ids}}, {});
    const json c = builder.body()["choices"][0];
    EXPECT_EQ(c["stop_reason"], ids[2]);
    EXPECT_EQ(c["finish_reason"], "stop");
    EXPECT_EQ(c["token_ids"], json(std::vector<int32_t>(ids.begin(), ids.begin() + 3)));
    EXPECT_EQ(c["prompt_token_ids"], json({5, 6}));
  }
  {  // The engine ran out of script: aborted completions say "abort"; batches index p * n + k.
    const ParsedRequest p =
        parse(server, R"({"prompt": [[5], [6]], "n": 2, "max_tokens": 50})", false);
    ResponseBuilder builder(p.plan, server.ctx);
    simulate(server, p, builder, {{ids, {ids[0]}}, {{ids[1]}, ids}}, {});
    const json j = builder.body();
    ASSERT_EQ(j["choices"].size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(j["choices"][i]["index"], i);
      EXPECT_EQ(j["choices"][i]["finish_reason"], "abort");
    }
    EXPECT_EQ(j["choices"][1]["text"], server.tok.decode(std::vector<int32_t>{ids[0]}));
    EXPECT_EQ(j["choices"][2]["text"], server.tok.decode(std::vector<int32_t>{ids[1]}));
    EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
    EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(2 * ids.size() + 2));
  }
  {  // An engine error: a 500 body, and in a stream an error event then [DONE].
    const ParsedRequest p = parse(server, R"({"prompt": [5], "stream": true})", false);
    ResponseBuilder builder(p.plan, server.ctx);
    engine::RequestOutput out;
    out.request_id = p.plan.request_ids[0];
    out.finished = true;
    out.error = "non-finite logits at position 3";
    engine::CompletionDelta d;
    d.finish = FinishReason::Error;
    out.completions.push_back(d);
    EXPECT_TRUE(builder.on_output(out).empty());
    EXPECT_TRUE(builder.finished());
    ASSERT_TRUE(builder.error().has_value());
    EXPECT_EQ(builder.error()->status, 500);
    const auto events = builder.stream_end();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_NE(events[0].find("non-finite logits"), std::string::npos);
    EXPECT_EQ(events[1], kSseDone);
  }
}

TEST(ProtocolMisc, TokenizeDetokenizeModels) {
  DemoServer server(256);
  auto get = [](const JsonResult& r) {
    if (auto* e = std::get_if<ApiError>(&r)) {
      ADD_FAILURE() << e->message;
      return json();
    }
    return std::get<json>(r);
  };
  const json t =
      get(handle_tokenize(R"({"prompt": "Hello world", "return_token_strs": true})", server.ctx));
  const std::vector<int32_t> ids = server.tok.encode("Hello world", true);
  EXPECT_EQ(t["tokens"], json(ids));
  EXPECT_EQ(t["count"], ids.size());
  EXPECT_EQ(t["max_model_len"], 256);
  ASSERT_EQ(t["token_strs"].size(), ids.size());
  EXPECT_EQ(t["token_strs"][0], "<s>");
  const json nt = get(handle_tokenize(
      R"({"model": "demo", "prompt": "Hello world", "add_special_tokens": false})", server.ctx));
  EXPECT_EQ(nt["tokens"], json(server.tok.encode("Hello world", false)));
  EXPECT_TRUE(nt["token_strs"].is_null());
  const json chat =
      get(handle_tokenize(R"({"messages": [{"role": "user", "content": "hi"}]})", server.ctx));
  EXPECT_EQ(chat["tokens"], json(server.tok.encode(
                                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false)));
  const json d = get(handle_detokenize(json({{"tokens", ids}}).dump(), server.ctx));
  EXPECT_EQ(d["prompt"], "<s>Hello world");
  for (const char* bad :
       {R"({"tokens": [-1]})", R"({"tokens": [99999]})", R"({"tokens": "x"})", "[]"}) {
    const JsonResult r = handle_detokenize(bad, server.ctx);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
  }
  EXPECT_EQ(
      std::get<ApiError>(handle_tokenize(R"({"prompt": "x", "model": "zzz"})", server.ctx)).status,
      404);
  EXPECT_EQ(std::get<ApiError>(handle_tokenize(R"({"messages": []})", server.ctx)).status, 400);
  const json m = models_body(server.ctx, 123);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "demo");
  EXPECT_EQ(m["data"][0]["root"], demo_dir());
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["created"], 123);
}

}  // namespace
}  // namespace strata::server::testing
