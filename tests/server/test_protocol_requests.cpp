// Request parsing and validation: a table of malformed requests (each must be a 400 / 404 with
// OpenAI's error body naming the parameter, bounded in size, never an exception), then valid
// requests checked field by field against what vLLM would build (defaults, max_tokens against
// the context, prompt forms, chat rendering, tools and thinking).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "protocol_test_util.h"
#include "server/openai_errors.h"

namespace strata::server::testing {
namespace {

using json = nlohmann::ordered_json;

struct BadCase {
  bool chat;
  std::string body;
  int status;
  const char* param;  // expected error.param; "" = null; "*" = not checked
};

std::string repeat_words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += " hello";
  return s;
}

// A prompt of exactly `n` token ids.
json ids_prompt(size_t n) {
  return json(std::vector<int32_t>(n, 5));
}

TEST(ProtocolRequests, MalformedRequestsAre4xxWithTheParameterNamed) {
  DemoServer server(64);
  const json at_limit = ids_prompt(64);
  const json near_limit = ids_prompt(50);
  std::string deep(100, '[');
  deep = R"({"prompt": )" + deep + std::string(100, ']') + "}";
  std::string many_stops = R"({"prompt": "hi", "stop": [)";
  for (int i = 0; i < 300; ++i)
    many_stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  many_stops += "]}";
  const char* tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";

  const std::vector<BadCase> cases = {
      // Not a JSON object.
      {false, "not json", 400, ""},
      {false, R"({"prompt": "x")", 400, ""},
      {false, R"("x")", 400, ""},
      {false, "[]", 400, ""},
      {false, "42", 400, ""},
      {false, "null", 400, ""},
      {false, "", 400, ""},
      {false, deep, 400, ""},
      {false, "{\"prompt\": \"a\xff\xfe\"}", 400, ""},  // invalid UTF-8
      {false, R"({"prompt": "\ud800"})", 400, ""},      // lone surrogate
      // Sampling ranges and types.
      {false, R"({"prompt": "hi", "temperature": -1})", 400, "temperature"},
      {false, R"({"prompt": "hi", "temperature": "abc"})", 400, "temperature"},
      {false, R"({"prompt": "hi", "temperature": 1e400})", 400, "*"},
      {false, R"({"prompt": "hi", "top_p": 0})", 400, "top_p"},
      {false, R"({"prompt": "hi", "top_p": 1.5})", 400, "top_p"},
      {false, R"({"prompt": "hi", "top_k": -2})", 400, "top_k"},
      {false, R"({"prompt": "hi", "top_k": 1.5})", 400, "top_k"},
      {false, R"({"prompt": "hi", "min_p": 2})", 400, "min_p"},
      {false, R"({"prompt": "hi", "min_p": -0.1})", 400, "min_p"},
      {false, R"({"prompt": "hi", "presence_penalty": 3})", 400, "presence_penalty"},
      {false, R"({"prompt": "hi", "frequency_penalty": -2.5})", 400, "frequency_penalty"},
      {false, R"({"prompt": "hi", "repetition_penalty": 0})", 400, "repetition_penalty"},
      {false, R"({"prompt": "hi", "repetition_penalty": -1})", 400, "repetition_penalty"},
      {false, R"({"prompt": "hi", "seed": "x"})", 400, "seed"},
      {false, R"({"prompt": "hi", "seed": 1e30})", 400, "seed"},
      {false, R"({"prompt": "hi", "n": 0})", 400, "n"},
      {false, R"({"prompt": "hi", "n": 1000000000})", 400, "n"},
      {false, R"({"prompt": "hi", "n": "2"})", 400, "n"},
      {false, R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens"},
      {false, R"({"prompt": "hi", "max_tokens": -5})", 400, "max_tokens"},
      {false, R"({"prompt": "hi", "max_tokens": "10"})", 400, "max_tokens"},
      {false, R"({"prompt": "hi", "max_tokens": 1.5})", 400, "max_tokens"},
      {false, R"({"prompt": "hi", "max_tokens": 100})", 400, "max_tokens"},
      {false, R"({"prompt": "hi", "min_tokens": -1})", 400, "min_tokens"},
      {false, R"({"prompt": "hi", "max_tokens": 5, "min_tokens": 10})", 400, "min_tokens"},
      {false, R"({"prompt": "hi", "ignore_eos": "x"})", 400, "ignore_eos"},
      {false, R"({"prompt": "hi", "skip_special_tokens": 1})", 400, "skip_special_tokens"},
      {false, R"({"prompt": "hi", "include_stop_str_in_output": "no"})", 400,
       "include_stop_str_in_output"},
      // Prompts.
      {false, R"({"max_tokens": 1})", 400, "prompt"},
      {false, R"({"prompt": ""})", 400, "prompt"},
      {false, R"({"prompt": []})", 400, "prompt"},
      {false, R"({"prompt": 5})", 400, "prompt"},
      {false, R"({"prompt": {"a": 1}})", 400, "prompt"},
      {false, R"({"prompt": [1, "a"]})", 400, "prompt"},
      {false, R"({"prompt": [-1]})", 400, "prompt"},
      {false, R"({"prompt": [999999]})", 400, "prompt"},
      {false, R"({"prompt": [[1, 2], []]})", 400, "prompt"},
      {false, R"({"prompt": "hi", "truncate_prompt_tokens": 0})", 400, "truncate_prompt_tokens"},
      // Context length (max_model_len 64): a 64-token prompt; 50 + the default 16.
      {false, json({{"prompt", at_limit}, {"max_tokens", 1}}).dump(), 400, "input_tokens"},
      {false, json({{"prompt", near_limit}}).dump(), 400, "max_tokens"},
      // Ids in logit_bias and stop_token_ids; stop strings; logprobs.
      {false, R"({"prompt": "hi", "logit_bias": {"-1": 1}})", 400, "logit_bias"},
      {false, R"({"prompt": "hi", "logit_bias": {"99999": 1}})", 400, "logit_bias"},
      {false, R"({"prompt": "hi", "logit_bias": {"abc": 1}})", 400, "logit_bias"},
      {false, R"({"prompt": "hi", "logit_bias": {"5": "x"}})", 400, "logit_bias"},
      {false, R"({"prompt": "hi", "logit_bias": [1]})", 400, "logit_bias"},
      {false, R"({"prompt": "hi", "stop_token_ids": [-1]})", 400, "stop_token_ids"},
      {false, R"({"prompt": "hi", "stop_token_ids": [99999]})", 400, "stop_token_ids"},
      {false, R"({"prompt": "hi", "stop_token_ids": "x"})", 400, "stop_token_ids"},
      {false, R"({"prompt": "hi", "stop": ""})", 400, "stop"},
      {false, R"({"prompt": "hi", "stop": [""]})", 400, "stop"},
      {false, R"({"prompt": "hi", "stop": [1]})", 400, "stop"},
      {false, many_stops, 400, "stop"},
      {false, R"({"prompt": "hi", "logprobs": 21})", 400, "logprobs"},
      {false, R"({"prompt": "hi", "logprobs": -1})", 400, "logprobs"},
      {false, R"({"prompt": "hi", "logprobs": "x"})", 400, "logprobs"},
      // Streaming and what strata refuses by name.
      {false, R"({"prompt": "hi", "stream_options": {"include_usage": true}})", 400,
       "stream_options"},
      {false, R"({"prompt": "hi", "stream": "yes"})", 400, "stream"},
      {false, R"({"prompt": "hi", "echo": true})", 400, "echo"},
      {false, R"({"prompt": "hi", "suffix": "x"})", 400, "suffix"},
      {false, R"({"prompt": "hi", "best_of": 2})", 400, "best_of"},
      {false, R"({"prompt": "hi", "use_beam_search": true})", 400, "use_beam_search"},
      {false, R"({"prompt": "hi", "prompt_logprobs": 1})", 400, "prompt_logprobs"},
      {false, R"({"prompt": "hi", "response_format": {"type": "json_object"}})", 400,
       "response_format"},
      {false, R"({"prompt": "hi", "guided_json": {"type": "object"}})", 400, "guided_json"},
      {false, R"({"prompt": "hi", "priority": 1})", 400, "priority"},
      // Model.
      {false, R"({"prompt": "hi", "model": "other"})", 404, "model"},
      {false, R"({"prompt": "hi", "model": 5})", 400, "model"},
      // Chat: messages.
      {true, R"({"model": "demo"})", 400, "messages"},
      {true, R"({"messages": []})", 400, "messages"},
      {true, R"({"messages": "x"})", 400, "messages"},
      {true, R"({"messages": [1]})", 400, "messages"},
      {true, R"({"messages": [{"content": "x"}]})", 400, "messages"},
      {true, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "messages"},
      {true, R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages"},
      {true,
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       400, "messages"},
      {true, "{" + msgs + R"(, "add_generation_prompt": true, "continue_final_message": true})",
       400, "messages"},
      {true, "{" + msgs + R"(, "chat_template_kwargs": "x"})", 400, "messages"},
      {true, "{" + msgs + R"(, "chat_template_kwargs": {"tools": []}})", 400, "messages"},
      {true, "{" + msgs + R"(, "chat_template": "{{ 1 }}"})", 400, "chat_template"},
      {true, "{" + msgs + R"(, "reasoning_effort": "extreme"})", 400, "reasoning_effort"},
      {true, json({{"messages", {{{"role", "user"}, {"content", repeat_words(80)}}}}}).dump(), 400,
       "input_tokens"},
      // Chat: tools and tool_choice.
      {true, "{" + msgs + R"(, "tools": []})", 400, "tools"},
      {true, "{" + msgs + R"(, "tools": "x"})", 400, "tools"},
      {true, "{" + msgs + R"(, "tools": [{"type": "function"}]})", 400, "tools"},
      {true, "{" + msgs + R"(, "tools": [{"function": {"name": ""}}]})", 400, "tools"},
      {true, "{" + msgs + R"(, "tools": [{"function": {"name": "f", "parameters": "x"}}]})", 400,
       "tools"},
      {true, "{" + msgs + R"(, "tool_choice": "auto"})", 400, "tool_choice"},
      {true, "{" + msgs + ", " + tools + "}", 400, "tool_choice"},  // auto by default, not enabled
      {true,
       "{" + msgs + ", " + tools +
           R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
       400, "tool_choice"},
      {true, "{" + msgs + ", " + tools + R"(, "tool_choice": 5})", 400, "tool_choice"},
      // Chat: logprobs and token limits.
      {true, "{" + msgs + R"(, "top_logprobs": 5})", 400, "top_logprobs"},
      {true, "{" + msgs + R"(, "logprobs": true, "top_logprobs": 21})", 400, "top_logprobs"},
      {true, "{" + msgs + R"(, "logprobs": true, "top_logprobs": -2})", 400, "top_logprobs"},
      {true, "{" + msgs + R"(, "logprobs": "yes"})", 400, "logprobs"},
      {true, "{" + msgs + R"(, "max_completion_tokens": 0})", 400, "max_completion_tokens"},
      {true, "{" + msgs + R"(, "max_tokens": 1000})", 400, "max_tokens"},
  };

  size_t checked = 0;
  for (const BadCase& c : cases) {
    const ParseResult r = c.chat ? parse_chat_request(c.body, server.ctx)
                                 : parse_completion_request(c.body, server.ctx);
    const ApiError* e = std::get_if<ApiError>(&r);
    const std::string shown = c.body.substr(0, 160);
    ASSERT_NE(e, nullptr) << "accepted: " << shown;
    EXPECT_EQ(e->status, c.status) << shown << " -> " << e->message;
    if (std::string(c.param) != "*") {
      EXPECT_EQ(e->param, c.param) << shown << " -> " << e->message;
    }
    const json body = json::parse(e->body_text());
    ASSERT_TRUE(body.contains("error")) << shown;
    const json& err = body["error"];
    EXPECT_TRUE(err["message"].is_string() && !err["message"].get<std::string>().empty());
    EXPECT_EQ(err["code"], c.status);
    EXPECT_TRUE(err["type"].is_string());
    EXPECT_TRUE(err.contains("param"));
    EXPECT_LE(e->body_text().size(), 8192u);
    ++checked;
  }
  EXPECT_EQ(checked, cases.size());
  EXPECT_GE(checked, 100u);
}

TEST(ProtocolRequests, ErrorBodiesStayBoundedWhateverTheInputSize) {
  DemoServer server;
  const std::string huge(1 << 20, 'a');
  const std::vector<std::string> bodies = {
      json({{"prompt", "hi"}, {"model", huge}}).dump(),
      json({{"prompt", "hi"}, {"response_format", {{"type", huge}}}}).dump(),
      json({{"prompt", "hi"}, {"logit_bias", {{huge, 1}}}}).dump(),
      "{\"prompt\": \"" + huge,  // truncated
  };
  for (const std::string& b : bodies) {
    const ParseResult r = parse_completion_request(b, server.ctx);
    const ApiError* e = std::get_if<ApiError>(&r);
    ASSERT_NE(e, nullptr);
    EXPECT_LT(e->body_text().size(), 4096u);
    EXPECT_EQ(e->body_text().find(std::string(2000, 'a')), std::string::npos);
  }
}

TEST(ProtocolRequests, CompletionDefaultsAndPromptForms) {
  DemoServer server;
  {
    const ParseResult r = parse_completion_request(
        R"({"prompt": "Hello world", "unknown_field": [1, {"x": 2}]})", server.ctx);
    const ParsedRequest p = ok(r);
    ASSERT_EQ(p.requests.size(), 1u);
    const engine::EngineRequest& q = p.requests[0];
    EXPECT_EQ(q.prompt, server.tok.encode("Hello world", true));
    EXPECT_EQ(q.prompt.front(), 1);  // <s>: add_special_tokens defaults to true
    EXPECT_EQ(q.params.max_tokens, 16);
    EXPECT_EQ(q.params.temperature, 1.f);
    EXPECT_EQ(q.params.n, 1);
    EXPECT_EQ(q.params.logprobs, -1);
    EXPECT_FALSE(p.plan.stream);
    EXPECT_EQ(p.plan.model, "demo");
    EXPECT_EQ(p.plan.id.rfind("cmpl-", 0), 0u);
    EXPECT_EQ(p.plan.request_ids, std::vector<std::string>{q.id});
    EXPECT_EQ(p.plan.prompt_ids[0], q.prompt);
  }
  {
    const ParsedRequest p = ok(parse_completion_request(
        R"({"prompt": ["a b", "c"], "n": 2, "add_special_tokens": false, "model": "demo",
            "stream": true, "stream_options": {}, "max_tokens": 3, "logprobs": 2})",
        server.ctx));
    ASSERT_EQ(p.requests.size(), 2u);
    EXPECT_EQ(p.requests[0].prompt, server.tok.encode("a b", false));
    EXPECT_EQ(p.requests[1].prompt, server.tok.encode("c", false));
    EXPECT_NE(p.requests[0].id, p.requests[1].id);
    EXPECT_EQ(p.requests[1].params.n, 2);
    EXPECT_EQ(p.requests[1].params.max_tokens, 3);
    EXPECT_EQ(p.plan.logprobs, 2);
    EXPECT_TRUE(p.plan.stream);
    EXPECT_TRUE(p.plan.include_usage);  // stream_options given: include_usage defaults to true
  }
  {
    const ParsedRequest p = ok(parse_completion_request(R"({"prompt": [5, 6, 7]})", server.ctx));
    EXPECT_EQ(p.requests[0].prompt, (std::vector<int32_t>{5, 6, 7}));
    const ParsedRequest b =
        ok(parse_completion_request(R"({"prompt": [[5], [6, 7]]})", server.ctx));
    ASSERT_EQ(b.requests.size(), 2u);
    EXPECT_EQ(b.requests[1].prompt, (std::vector<int32_t>{6, 7}));
    const ParsedRequest t = ok(parse_completion_request(
        R"({"prompt": [5, 6, 7, 8, 9], "truncate_prompt_tokens": 2})", server.ctx));
    EXPECT_EQ(t.requests[0].prompt, (std::vector<int32_t>{8, 9}));
  }
  {  // The context boundary: 63 prompt tokens + 1 fits, + 2 does not.
    const json p63 = ids_prompt(63);
    const ParsedRequest p =
        ok(parse_completion_request(json({{"prompt", p63}, {"max_tokens", 1}}).dump(), server.ctx));
    EXPECT_EQ(p.requests[0].params.max_tokens, 1);
    const ParseResult bad =
        parse_completion_request(json({{"prompt", p63}, {"max_tokens", 2}}).dump(), server.ctx);
    ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
    EXPECT_EQ(std::get<ApiError>(bad).param, "max_tokens");
  }
}

TEST(ProtocolRequests, SamplingFieldsFollowVllm) {
  DemoServer server;
  server.ctx.generation_defaults.temperature = 0.6f;
  server.ctx.generation_defaults.top_p = 0.95f;
  const ParsedRequest d = ok(parse_completion_request(R"({"prompt": "hi"})", server.ctx));
  EXPECT_FLOAT_EQ(d.requests[0].params.temperature, 0.6f);  // generation_config.json default
  EXPECT_FLOAT_EQ(d.requests[0].params.top_p, 0.95f);
  const ParsedRequest p = ok(parse_completion_request(
      R"({"prompt": "hi", "temperature": 0.001, "top_p": 0.5, "top_k": -1, "min_p": 0.1,
          "presence_penalty": -2, "frequency_penalty": 2, "repetition_penalty": 1.2,
          "seed": -3, "stop": "END", "stop_token_ids": [11, 2], "ignore_eos": true,
          "min_tokens": 2, "max_tokens": 4, "logit_bias": {"7": 200, "8": -1.5},
          "include_stop_str_in_output": true, "skip_special_tokens": false, "n": 3,
          "return_token_ids": true, "request_id": "abc", "best_of": 1, "response_format": {"type": "text"}})",
      server.ctx));
  const engine::SamplingParams& s = p.requests[0].params;
  EXPECT_FLOAT_EQ(s.temperature, 0.01f);  // (0, 0.01) is raised to 0.01, as vLLM does
  EXPECT_FLOAT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, -2.f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, 2.f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.2f);
  ASSERT_TRUE(s.seed.has_value());
  EXPECT_EQ(static_cast<int64_t>(*s.seed), -3);
  EXPECT_EQ(s.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{11, 2}));
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_EQ(s.max_tokens, 4);
  ASSERT_EQ(s.logit_bias.size(), 2u);
  EXPECT_EQ(s.logit_bias[0], (std::pair<int32_t, float>{7, 100.f}));  // clamped to OpenAI's range
  EXPECT_EQ(s.logit_bias[1], (std::pair<int32_t, float>{8, -1.5f}));
  EXPECT_TRUE(s.include_stop_str_in_output);
  EXPECT_FALSE(s.skip_special_tokens);
  EXPECT_EQ(s.n, 3);
  EXPECT_TRUE(p.plan.return_token_ids);
  EXPECT_EQ(p.plan.id, "cmpl-abc");
  const ParsedRequest h = ok(parse_completion_request(R"({"prompt": "hi"})", server.ctx, "hdr-1"));
  EXPECT_EQ(h.plan.id, "cmpl-hdr-1");
  // The model may be named by its alias or left out.
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(parse_completion_request(
      json({{"prompt", "hi"}, {"model", demo_dir()}}).dump(), server.ctx)));
}

TEST(ProtocolRequests, ChatRendersTheTemplateAndEncodesWithoutSpecialTokens) {
  DemoServer server;
  const ParsedRequest p = ok(parse_chat_request(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "a fortune."}]}],
          "logprobs": true})",
      server.ctx));
  const std::string want =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTell me\na fortune.<|im_end|>\n"
      "<|im_start|>assistant\n";
  const std::vector<int32_t> ids = server.tok.encode(want, false);
  EXPECT_EQ(p.requests[0].prompt, ids);
  EXPECT_NE(ids.front(), 1);  // no <s>
  // max_tokens defaults to the rest of the context.
  EXPECT_EQ(p.requests[0].params.max_tokens, 64 - static_cast<int64_t>(ids.size()));
  EXPECT_EQ(p.plan.logprobs, 0);
  EXPECT_EQ(p.plan.endpoint, Endpoint::ChatCompletions);
  EXPECT_EQ(p.plan.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(p.plan.tool_choice, ToolChoice::None);
  const ParsedRequest q = ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 3, "max_tokens": 9,
          "logprobs": true, "top_logprobs": 4, "continue_final_message": false})",
      server.ctx));
  EXPECT_EQ(q.requests[0].params.max_tokens, 3);  // max_completion_tokens wins
  EXPECT_EQ(q.plan.logprobs, 4);
  // continue_final_message: the assistant turn is left open after its content.
  const ParsedRequest c = ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "Once upon"}],
          "add_generation_prompt": false, "continue_final_message": true})",
      server.ctx));
  EXPECT_EQ(
      c.requests[0].prompt,
      server.tok.encode("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\nOnce upon", false));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ProtocolRequests, NemotronTemplatesDecideThinkingAndTools) {
  DemoServer server(4096);
  const text::ChatPromptBuilder nano3 = text::ChatPromptBuilder::from_source(
      read_file(chat_fixture("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja")), "<s>", "<|im_end|>");
  const text::ChatPromptBuilder nano2 = text::ChatPromptBuilder::from_source(
      read_file(chat_fixture("NVIDIA-Nemotron-Nano-v2.jinja")), "<s>", "<SPECIAL_12>");
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  server.ctx.reasoning_parser = "nano_v3";
  server.ctx.chat = &nano3;
  EXPECT_TRUE(ok(parse_chat_request("{" + user + "}", server.ctx)).plan.thinking_enabled);
  EXPECT_FALSE(
      ok(parse_chat_request("{" + user + R"(, "chat_template_kwargs": {"enable_thinking": false}})",
                            server.ctx))
          .plan.thinking_enabled);
  EXPECT_FALSE(ok(parse_chat_request("{" + user + R"(, "reasoning_effort": "none"})", server.ctx))
                   .plan.thinking_enabled);
  EXPECT_TRUE(ok(parse_chat_request("{" + user + R"(, "reasoning_effort": "high"})", server.ctx))
                  .plan.thinking_enabled);
  // The rendered prompt itself: thinking off ends the prompt with "<think></think>".
  const ParsedRequest off = ok(parse_chat_request(
      "{" + user + R"(, "chat_template_kwargs": {"enable_thinking": false}})", server.ctx));
  const std::string rendered = server.tok.decode(off.requests[0].prompt);
  EXPECT_TRUE(rendered.ends_with("<|im_start|>assistant\n<think></think>")) << rendered;
  EXPECT_EQ(off.plan.reasoning_parser, "nano_v3");
  // Nano v2: "/no_think" in the system message turns thinking off (read off the prompt).
  server.ctx.chat = &nano2;
  EXPECT_FALSE(
      ok(parse_chat_request(
             R"({"messages": [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi"}]})",
             server.ctx))
          .plan.thinking_enabled);
  EXPECT_TRUE(ok(parse_chat_request("{" + user + "}", server.ctx)).plan.thinking_enabled);
  // Tools with auto tool choice enabled: the template lists them and the plan parses calls.
  server.ctx.enable_auto_tool_choice = true;
  server.ctx.tool_call_parser = "nemotron_json";
  const ParsedRequest t = ok(parse_chat_request(
      "{" + user +
          R"(, "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})",
      server.ctx));
  EXPECT_EQ(t.plan.tool_choice, ToolChoice::Auto);
  EXPECT_EQ(t.plan.tool_call_parser, "nemotron_json");
  EXPECT_NE(
      server.tok.decode(t.requests[0].prompt).find("<AVAILABLE_TOOLS>[{\"name\": \"get_weather\""),
      std::string::npos);
  // tool_choice none keeps the plan free of tool parsing.
  const ParsedRequest n = ok(parse_chat_request(
      "{" + user +
          R"(, "tool_choice": "none", "tools": [{"type": "function", "function": {"name": "f"}}]})",
      server.ctx));
  EXPECT_EQ(n.plan.tool_choice, ToolChoice::None);
  // include_reasoning false drops the reasoning fields.
  const ParsedRequest r =
      ok(parse_chat_request("{" + user + R"(, "include_reasoning": false})", server.ctx));
  EXPECT_FALSE(r.plan.emit_reasoning);
  EXPECT_FALSE(r.plan.emit_reasoning_content);
}

// Random values in every field of valid requests: the parser answers (no exception), and every
// refusal is a 4xx, never a 500.
TEST(ProtocolRequests, RandomFieldValuesNeverEscapeOrGive5xx) {
  DemoServer server(128);
  server.ctx.enable_auto_tool_choice = true;
  server.ctx.tool_call_parser = "nemotron_json";
  server.ctx.reasoning_parser = "nano_v3";
  const json completion = json::parse(R"({"model": "demo", "prompt": "Hello", "max_tokens": 4,
      "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "n": 2, "stop": ["x"],
      "stop_token_ids": [2], "logprobs": 1, "logit_bias": {"5": 1}, "seed": 3, "stream": true,
      "stream_options": {"include_usage": true}, "min_tokens": 1, "ignore_eos": false,
      "presence_penalty": 0.1, "frequency_penalty": 0.1, "repetition_penalty": 1.1,
      "return_token_ids": true, "add_special_tokens": true, "truncate_prompt_tokens": 10})");
  const json chat = json::parse(R"({"model": "demo", "messages": [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": "ok", "tool_calls": [{"id": "1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "r"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": "auto", "logprobs": true, "top_logprobs": 2, "max_completion_tokens": 5,
      "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low",
      "add_generation_prompt": true, "include_reasoning": true})");
  const std::vector<json> values = {nullptr,
                                    true,
                                    false,
                                    0,
                                    -1,
                                    1,
                                    2,
                                    7,
                                    -7,
                                    1e300,
                                    -1e300,
                                    0.5,
                                    1e19,
                                    -9223372036854775807LL,
                                    18446744073709551615ULL,
                                    "",
                                    "x",
                                    "\u0000",
                                    json::array(),
                                    json::array({1, 2}),
                                    json::array({"a", 1}),
                                    json::array({json::array({1})}),
                                    json::object(),
                                    json({{"a", 1}}),
                                    json({{"type", "text"}}),
                                    json({{"role", "user"}})};
  std::mt19937 rng(3);
  size_t accepted = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const bool is_chat = trial % 2 == 1;
    json body = is_chat ? chat : completion;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      auto it = body.begin();
      std::advance(it, rng() % body.size());
      if (rng() % 4 == 0 && it->is_array() && !it->empty()) {
        (*it)[rng() % it->size()] = values[rng() % values.size()];
      } else {
        *it = values[rng() % values.size()];
      }
    }
    const std::string text = body.dump();
    ParseResult r;
    ASSERT_NO_THROW(r = is_chat ? parse_chat_request(text, server.ctx)
                                : parse_completion_request(text, server.ctx))
        << text;
    if (const auto* err = std::get_if<ApiError>(&r)) {
      EXPECT_TRUE(err->status == 400 || err->status == 404)
          << err->status << " " << err->message << "\n"
          << text;
      ++refused;
    } else {
      ++accepted;
    }
  }
  EXPECT_EQ(accepted + refused, 3000u);
  EXPECT_GT(refused, 1000u);
  EXPECT_GT(accepted, 100u);
}

TEST(ProtocolRequests, ServingContextCheck) {
  DemoServer server;
  EXPECT_FALSE(check_serving_context(server.ctx).has_value());
  server.ctx.tool_call_parser = "hermes";
  EXPECT_TRUE(check_serving_context(server.ctx).has_value());
  server.ctx.tool_call_parser = "";
  server.ctx.enable_auto_tool_choice = true;
  EXPECT_TRUE(check_serving_context(server.ctx).has_value());
  server.ctx.tool_call_parser = "qwen3_coder";
  EXPECT_FALSE(check_serving_context(server.ctx).has_value());
  server.ctx.reasoning_parser = "nope";
  EXPECT_TRUE(check_serving_context(server.ctx).has_value());
  server.ctx.reasoning_parser = "nano_v3";
  EXPECT_FALSE(check_serving_context(server.ctx).has_value());
  server.ctx.max_model_len = 0;
  EXPECT_TRUE(check_serving_context(server.ctx).has_value());
}

TEST(ProtocolRequests, WithoutATokenizerOnlyTokenIdsAreServed) {
  DemoServer server;
  server.ctx.tokenizer = nullptr;
  const ParsedRequest p =
      ok(parse_completion_request(R"({"prompt": [5, 6], "max_tokens": 2})", server.ctx));
  EXPECT_FALSE(p.plan.detokenize);
  EXPECT_FALSE(p.requests[0].params.detokenize);
  for (const char* body : {R"({"prompt": "text"})", R"({"prompt": [5], "stop": "x"})"}) {
    const ParseResult r = parse_completion_request(body, server.ctx);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
  }
  const ParseResult c =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})", server.ctx);
  ASSERT_TRUE(std::holds_alternative<ApiError>(c));
}

}  // namespace
}  // namespace strata::server::testing
