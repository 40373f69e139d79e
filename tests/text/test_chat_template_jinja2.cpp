// Every real chat template in tests/fixtures/chat/templates rendered on every conversation in
// tests/fixtures/chat/conversations.json, by strata and by Python's jinja2 in transformers'
// environment: the outputs must be the same bytes, and where jinja2 raises strata must raise.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "jinja2_reference.h"

namespace strata::testing {
namespace {

const std::string kFixtures = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/chat";

std::vector<std::filesystem::path> template_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kFixtures + "/templates"))
    if (e.path().extension() == ".jinja") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ChatTemplateVsJinja2, EveryTemplateOnEveryConversation) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const auto conversations =
      nlohmann::ordered_json::parse(read_file(kFixtures + "/conversations.json"));
  const auto tokens = nlohmann::ordered_json::parse(read_file(kFixtures + "/special_tokens.json"));
  const auto templates = template_files();
  ASSERT_EQ(templates.size(), 8u)
      << "tests/fixtures/chat/templates should hold the 8 shared templates";
  ASSERT_GE(conversations.size(), 50u);

  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  std::vector<std::string> labels;
  std::vector<std::string> sources;
  for (const auto& path : templates) {
    const std::string name = path.filename().string();
    const auto tok =
        tokens.value(name, nlohmann::ordered_json{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    for (const auto& conv : conversations) {
      nlohmann::ordered_json c = conv;
      c["template"] = path.string();
      c["bos_token"] = tok["bos_token"];
      c["eos_token"] = tok["eos_token"];
      if (!c.contains("tools")) c["tools"] = nullptr;
      cases.push_back(std::move(c));
      labels.push_back(name + " x " + conv["name"].get<std::string>());
      sources.push_back(path.string());
    }
  }

  const auto want = render_with_jinja2(cases);
  ASSERT_EQ(want.size(), cases.size());

  size_t compared = 0, rendered = 0, raised = 0;
  std::map<std::string, std::string> source_text;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto& src = source_text[sources[i]];
    if (src.empty()) src = read_file(sources[i]);
    const StrataResult got = render_with_strata(src, cases[i]);
    const std::string diff = compare_results(want[i], got);
    EXPECT_TRUE(diff.empty()) << labels[i] << ": " << diff;
    ++compared;
    (want[i].ok ? rendered : raised) += 1;
  }
  // Every (template, conversation) pair was compared; most render, some raise by design
  // (Mistral's alternation rule, Llama's single tool call, empty message lists).
  EXPECT_EQ(compared, templates.size() * conversations.size());
  EXPECT_GE(compared, 400u);
  EXPECT_GT(rendered, compared * 3 / 4);
  EXPECT_GT(raised, 0u);
  std::printf(
      "compared %zu (template, conversation) pairs: %zu rendered identically, %zu raised in both\n",
      compared, rendered, raised);
}

// A long agentic conversation (about 2,700 messages, 330 tool calls) renders identically and
// within the default sandbox limits: the limits stop abuse, not real use.
TEST(ChatTemplateVsJinja2, LongConversationWithinDefaultLimits) {
  STRATA_SKIP_WITHOUT_JINJA2();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int i = 0; i < 1000; ++i) {
    messages.push_back({{"role", "user"},
                        {"content", "Question " + std::to_string(i) + ": what about café " +
                                        std::to_string(i * 7) + "?"}});
    if (i % 3 == 0) {
      nlohmann::ordered_json call = {
          {"id", "call" + std::to_string(100000 + i).substr(1)},
          {"type", "function"},
          {"function",
           {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"days", {i % 5, 2.5}}}}}}};
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", call["id"]},
                          {"content", std::to_string(i % 30) + " degrees"}});
    }
    messages.push_back({{"role", "assistant"},
                        {"content", "Answer " + std::to_string(i)},
                        {"reasoning_content", "step " + std::to_string(i)}});
  }
  messages.push_back({{"role", "user"}, {"content", "Thanks, bye."}});
  const auto tools =
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  const auto templates = template_files();
  for (const auto& path : templates) {
    cases.push_back({{"template", path.string()},
                     {"messages", messages},
                     {"tools", tools},
                     {"add_generation_prompt", true},
                     {"kwargs", {{"enable_thinking", true}}},
                     {"bos_token", "<s>"},
                     {"eos_token", "</s>"}});
  }
  const auto want = render_with_jinja2(cases);
  ASSERT_EQ(want.size(), cases.size());
  size_t compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const StrataResult got = render_with_strata(read_file(templates[i].string()), cases[i]);
    EXPECT_TRUE(want[i].ok) << templates[i] << ": " << want[i].error;
    EXPECT_TRUE(got.ok) << templates[i] << ": " << got.error;
    EXPECT_EQ(compare_results(want[i], got), "") << templates[i];
    EXPECT_GT(got.text.size(), 100000u);
    ++compared;
  }
  EXPECT_EQ(compared, 8u);
}

}  // namespace
}  // namespace strata::testing
