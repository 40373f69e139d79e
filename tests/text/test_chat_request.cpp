// text/chat_request: the OpenAI chat fields read from a request, the messages as the template
// sees them, the kwargs (server defaults < request kwargs; reasoning_effort only when
// enable_thinking is unset), continue_final_message, and the ids of `generate --chat`, checked
// against the template rendered directly.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

using json = nlohmann::ordered_json;

std::string demo_dir() {
  return std::string(STRATA_SOURCE_DIR) + "/models/demo";
}

TEST(ChatRequest, FieldsFromJson) {
  const json body = json::parse(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "documents": [{"text": "d"}],
      "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low",
      "add_generation_prompt": false, "continue_final_message": true, "ignored": 1})");
  const ChatPromptRequest r = chat_prompt_request_from_json(body);
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.documents.size(), 1u);
  EXPECT_EQ(r.template_kwargs, json({{"enable_thinking", false}}));
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  const ChatPromptRequest d = chat_prompt_request_from_json(json::parse(R"({"messages": []})"));
  EXPECT_TRUE(d.add_generation_prompt);
  EXPECT_TRUE(d.tools.is_null());
  for (const char* bad : {R"({})", R"({"messages": {}})", R"({"messages": [], "tools": 1})",
                          R"({"messages": [], "chat_template_kwargs": []})",
                          R"({"messages": [], "add_generation_prompt": "yes"})",
                          R"({"messages": [], "reasoning_effort": 3})", "[1]"})
    EXPECT_THROW(chat_prompt_request_from_json(json::parse(bad)), Error) << bad;
}

TEST(ChatRequest, MessagesAsTheTemplateSeesThem) {
  const json in = json::parse(R"([
      {"role": "user", "content": [{"type": "text", "text": "a"}, "b", {"type": "input_text", "text": "c"}]},
      {"role": "assistant", "content": null, "reasoning": "because",
       "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "assistant", "content": "ok", "reasoning_content": "r2"}])");
  const json out = normalize_chat_messages(in);
  EXPECT_EQ(out[0]["content"], "a\nb\nc");
  EXPECT_EQ(out[1]["reasoning_content"], "because");
  EXPECT_EQ(out[1]["tool_calls"][0]["function"]["arguments"], json({{"x", 1}}));
  EXPECT_EQ(out[2]["reasoning"], "r2");
  const json kept = normalize_chat_messages(in, /*parse_tool_call_arguments=*/false);
  EXPECT_EQ(kept[1]["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");
  for (const char* bad : {R"([1])", R"([{"content": "x"}])",
                          R"([{"role": "user", "content": [{"type": "image_url"}]}])",
                          R"([{"role": "user", "content": [{"type": "text"}]}])",
                          R"([{"role": "user", "content": 4}])"})
    EXPECT_THROW(normalize_chat_messages(json::parse(bad)), Error) << bad;
}

TEST(ChatRequest, KwargsPrecedenceAndThinking) {
  const auto b = ChatPromptBuilder::from_source(
      "{{ enable_thinking }}|{{ budget }}|{{ documents | length if documents else 0 }}", "<s>",
      "</s>", json({{"budget", 1}, {"enable_thinking", true}}));
  ChatPromptRequest r;
  r.messages = json::array({{{"role", "user"}, {"content", "x"}}});
  EXPECT_EQ(b.render(r), "True|1|0");
  r.template_kwargs = {{"budget", 2}};
  r.documents = json::array({{{"text", "d"}}});
  EXPECT_EQ(b.render(r), "True|2|1");
  // The server default sets enable_thinking, so reasoning_effort does not override it...
  r.reasoning_effort = "none";
  EXPECT_EQ(b.render(r), "True|2|1");
  EXPECT_TRUE(b.thinking_enabled(r));
  // ...but without a default it decides.
  const auto plain =
      ChatPromptBuilder::from_source("{{ enable_thinking }}", std::nullopt, std::nullopt);
  EXPECT_EQ(plain.render(r), "False");
  EXPECT_FALSE(plain.thinking_enabled(r));
  r.reasoning_effort = "medium";
  EXPECT_EQ(plain.render(r), "True");
  r.template_kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(plain.render(r), "False");  // the request's kwargs win over reasoning_effort
  r.add_generation_prompt = true;
  r.continue_final_message = true;
  EXPECT_THROW(plain.render(r), Error);
}

TEST(ChatRequest, ContinueFinalMessageCutsAfterItsContent) {
  const auto b = ChatPromptBuilder::from_source(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}",
      std::nullopt, std::nullopt);
  ChatPromptRequest r;
  r.messages = json::parse(
      R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": " Once upon "}])");
  r.add_generation_prompt = false;
  r.continue_final_message = true;
  // As transformers: found stripped, and cut after the stripped text (the message has leading
  // whitespace, so the rendering is not the message verbatim)...
  EXPECT_EQ(b.render(r), "<user>hi</user>\n<assistant> Once upon");
  // ...while a message rendered verbatim keeps its trailing whitespace.
  r.messages[1]["content"] = "Once upon ";
  EXPECT_EQ(b.render(r), "<user>hi</user>\n<assistant>Once upon ");
  r.messages = json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_THROW(b.render(r), Error);  // the final message must be the assistant's
}

TEST(ChatRequest, GenerateChatIdsEqualTheTemplateRenderedDirectly) {
  const Tokenizer tok = Tokenizer::from_dir(demo_dir());
  const auto builder = ChatPromptBuilder::from_model_dir(demo_dir());
  const auto templates = ModelChatTemplates::load(demo_dir());
  json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "Tell me a fortune."}}});
  const std::string direct = templates.render(messages, nullptr, true, json::object());
  EXPECT_EQ(chat_prompt_ids(builder, tok, single_turn_chat("Tell me a fortune.", "Be brief.")),
            tok.encode(direct, false));
  EXPECT_EQ(builder.render(single_turn_chat("hi")),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(ChatPromptBuilder::from_model_dir(demo_dir() + "/nope"), Error);
}

}  // namespace
}  // namespace strata::text
