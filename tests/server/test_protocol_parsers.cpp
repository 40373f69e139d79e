// The reasoning split and the tool-call parsers: whole-text results checked by hand, streaming
// checked against the whole-text result under every way of cutting the text into deltas, and
// tool calls round-tripped through the real Nemotron templates (the template writes a call the
// way the model is trained to; the parser must read it back).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "server/reasoning_parser.h"
#include "server/tool_parser.h"
#include "text/chat_request.h"

namespace strata::server {
namespace {

using json = nlohmann::ordered_json;

// Cuts `text` into deltas of 1..max_len bytes.
std::vector<std::string> random_cuts(const std::string& text, std::mt19937& rng, size_t max_len) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t len = std::min(text.size() - at, 1 + rng() % max_len);
    out.push_back(text.substr(at, len));
    at += len;
  }
  return out;
}

TEST(ReasoningParser, WholeText) {
  const ReasoningParser on(true), off(false);
  ReasoningSplit s = on.split("Let me think.</think>The answer is 4.");
  EXPECT_EQ(s.reasoning, "Let me think.");
  EXPECT_EQ(s.content, "The answer is 4.");
  EXPECT_TRUE(s.has_reasoning && s.has_content);
  s = on.split("<think>Hmm</think>Yes");
  EXPECT_EQ(s.reasoning, "Hmm");
  EXPECT_EQ(s.content, "Yes");
  s = on.split("still thinking");  // ran out of tokens inside <think>
  EXPECT_EQ(s.reasoning, "still thinking");
  EXPECT_FALSE(s.has_content);
  s = on.split("</think>only content");
  EXPECT_FALSE(s.has_reasoning);
  EXPECT_EQ(s.content, "only content");
  s = off.split("plain answer");  // enable_thinking=false: nano_v3 reads it as content
  EXPECT_FALSE(s.has_reasoning);
  EXPECT_EQ(s.content, "plain answer");
  EXPECT_TRUE(ReasoningParser::known("nano_v3"));
  EXPECT_TRUE(ReasoningParser::known("deepseek_r1"));
  EXPECT_FALSE(ReasoningParser::known("nope"));
  EXPECT_EQ(ReasoningParser::create("nope", true), nullptr);
}

TEST(ReasoningParser, StreamingEqualsWholeTextForEveryCut) {
  const std::vector<std::string> texts = {"Let me think.</think>The answer is 4.",
                                          "<think>Hmm, </thin and more</think>\n\nYes.",
                                          "no end tag at all <",
                                          "</think>",
                                          "<think>",
                                          "<thi",
                                          "a</think>b</think>c",
                                          "",
                                          "caf\xC3\xA9 </think> \xF0\x9F\x99\x82"};
  std::mt19937 rng(11);
  size_t runs = 0;
  for (const std::string& t : texts) {
    for (bool thinking : {true, false}) {
      const ReasoningSplit whole = ReasoningParser(thinking).split(t);
      for (int trial = 0; trial < 50; ++trial) {
        ReasoningParser p(thinking);
        std::string reasoning, content;
        for (const std::string& d : random_cuts(t, rng, 1 + trial % 5)) {
          const ReasoningSplit s = p.push(d);
          reasoning += s.reasoning;
          content += s.content;
          EXPECT_EQ(s.has_reasoning, !s.reasoning.empty());
        }
        const ReasoningSplit end = p.finish();
        reasoning += end.reasoning;
        content += end.content;
        ASSERT_EQ(reasoning, whole.reasoning) << t << " thinking " << thinking;
        ASSERT_EQ(content, whole.content) << t << " thinking " << thinking;
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, texts.size() * 2 * 50);
}

TEST(ToolParser, NemotronJson) {
  auto p = ToolParser::create("nemotron_json", json());
  ASSERT_NE(p, nullptr);
  const ToolParseResult r = p->parse(
      "Sure.<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}]</TOOLCALL>");
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(r.calls[1].name, "f");
  EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"a", 1}}));
  EXPECT_EQ(r.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  // Malformed: the whole text stays content.
  const std::string bad = "x<TOOLCALL>[{\"name\": </TOOLCALL>";
  const ToolParseResult m = p->parse(bad);
  EXPECT_EQ(m.content, bad);
  EXPECT_TRUE(m.calls.empty());
  // Unclosed at the end (the model stopped at EOS): parsed as if closed.
  const ToolParseResult u = p->parse("<TOOLCALL>[{\"name\": \"f\", \"arguments\": {}}]");
  ASSERT_EQ(u.calls.size(), 1u);
  EXPECT_EQ(u.calls[0].arguments, "{}");
  EXPECT_EQ(u.content, "");
  // No markers: all content.
  EXPECT_EQ(p->parse("just text").content, "just text");
  EXPECT_EQ(ToolParser::create("nope", json()), nullptr);
}

TEST(ToolParser, Qwen3CoderTypesValuesByTheSchema) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}, "zip": {"type": "string"}, "opts": {"type": "object"}}}}}])");
  auto p = ToolParser::create("qwen3_coder", tools);
  const ToolParseResult r = p->parse(
      "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan "
      "Francisco\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=zip>\n94105\n</parameter>\n"
      "<parameter=opts>\n{\"units\": \"metric\"}\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(r.content, "Checking.\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(
      json::parse(r.calls[0].arguments),
      json::parse(
          R"({"city": "San Francisco", "days": 3, "zip": "94105", "opts": {"units": "metric"}})"));
  // The text vLLM's parser gives (Python's json.dumps separators), streamed or not.
  EXPECT_EQ(r.calls[0].arguments,
            R"({"city": "San Francisco", "days": 3, "zip": "94105", "opts": {"units": "metric"}})");
  // Without a schema, values that read as JSON are JSON.
  auto bare = ToolParser::create("qwen3_coder", json());
  const ToolParseResult b = bare->parse(
      "<tool_call>\n<function=f>\n<parameter=n>\n7\n</parameter>\n<parameter=s>\nhi\n</"
      "parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(json::parse(b.calls[0].arguments), json::parse(R"({"n": 7, "s": "hi"})"));
}

TEST(ToolParser, StreamingEqualsWholeTextForEveryCut) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nemotron_json",
       "Sure.<TOOLCALL>[{\"name\": \"a\", \"arguments\": {\"x\": 1}}]</TOOLCALL> after"},
      {"nemotron_json",
       "<TOOLCALL>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"y\": "
       "[1, 2]}}]</TOOLCALL>"},
      {"nemotron_json",
       "<TOOLCALL>{\"arguments\": \"{\\\"a\\\": [1]}\", \"name\": \"s\"}</TOOLCALL>"},
      {"nemotron_json", "text with <TOOL but no call"},
      {"nemotron_json", "<TOOLCALL>[broken</TOOLCALL>tail"},
      {"qwen3_coder",
       "pre "
       "<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</"
       "tool_call><tool_call>\n<function=g>\n</function>\n</tool_call>"},
      {"qwen3_coder",
       "<tool_call>\n<function=f>\n<parameter=a>\n[1, 2]\n</parameter>\n<parameter=b>\nx y"},
  };
  std::mt19937 rng(5);
  size_t runs = 0;
  int pieces = 0;  // calls that arrived as pieces
  for (const auto& [name, text] : cases) {
    const ToolParseResult whole = ToolParser::create(name, json())->parse(text);
    for (int trial = 0; trial < 60; ++trial) {
      auto p = ToolParser::create(name, json());
      std::string content;
      std::vector<ToolCall> calls;
      // Whole calls, or pieces (the name first, then argument pieces) that concatenate to the
      // calls.
      auto take = [&](ToolStreamDelta& s) {
        content += s.content;
        for (ToolCall& c : s.calls)
          calls.push_back(std::move(c));
        for (ToolCallDelta& piece : s.pieces) {
          if (piece.header) {
            EXPECT_EQ(piece.index, static_cast<int32_t>(calls.size()));
            calls.push_back(*piece.header);
            ++pieces;
          }
          ASSERT_LT(piece.index, static_cast<int32_t>(calls.size()));
          calls[static_cast<size_t>(piece.index)].arguments += piece.arguments;
        }
      };
      for (const std::string& d : random_cuts(text, rng, 1 + trial % 7)) {
        ToolStreamDelta s = p->push(d);
        EXPECT_EQ(s.first_index, static_cast<int32_t>(calls.size()));
        take(s);
      }
      ToolStreamDelta end = p->finish();
      take(end);
      ASSERT_EQ(content, whole.content) << text;
      ASSERT_EQ(calls.size(), whole.calls.size()) << text;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].name, whole.calls[i].name);
        EXPECT_EQ(calls[i].arguments, whole.calls[i].arguments);
      }
      EXPECT_EQ(p->calls_emitted(), static_cast<int32_t>(calls.size()));
      ++runs;
    }
  }
  EXPECT_EQ(runs, cases.size() * 60);
  EXPECT_EQ(pieces, 60 * (1 + 2 + 1 + 2 + 1));  // every call streamed, not held
}

std::string template_text(const std::string& name) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/chat/templates/" + name,
                   std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The assistant turn a template renders for a tool call, read back by the matching parser.
TEST(ToolParser, ReadsBackWhatTheNemotronTemplatesWrite) {
  const json args = json::parse(R"({"city": "Paris", "days": 2, "tags": ["a", "b"]})");
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}, "tags": {"type": "array"}}}}}])");
  json messages = json::array();
  messages.push_back({{"role", "user"}, {"content", "Weather?"}});
  messages.push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        json::array({{{"id", "c1"},
                      {"type", "function"},
                      {"function", {{"name", "get_weather"}, {"arguments", args.dump()}}}}})}});
  messages.push_back({{"role", "user"}, {"content", "thanks"}});
  struct Subject {
    const char* file;
    const char* parser;
    const char* open;
    const char* close;
  };
  const Subject subjects[] = {
      {"NVIDIA-Nemotron-Nano-v2.jinja", "nemotron_json", "<TOOLCALL>", "</TOOLCALL>"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3_coder", "<tool_call>", "</tool_call>"},
  };
  for (const Subject& s : subjects) {
    const auto builder = text::ChatPromptBuilder::from_source(template_text(s.file), "<s>", "</s>");
    text::ChatPromptRequest req;
    req.messages = messages;
    req.tools = tools;
    const std::string prompt = builder.render(req);
    // The last call in the prompt is the assistant's (the system prompt shows the format too).
    const size_t a = prompt.rfind(s.open), b = prompt.rfind(s.close);
    ASSERT_NE(a, std::string::npos) << s.file << "\n" << prompt;
    ASSERT_NE(b, std::string::npos) << s.file;
    const std::string call_text = prompt.substr(a, b + std::string(s.close).size() - a);
    const ToolParseResult r = ToolParser::create(s.parser, tools)->parse(call_text);
    ASSERT_EQ(r.calls.size(), 1u) << s.file << ": " << call_text;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), args) << s.file << ": " << call_text;
    EXPECT_EQ(r.content, "");
  }
}

}  // namespace
}  // namespace strata::server
