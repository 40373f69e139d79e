// ChatTemplate and ModelChatTemplates: finding a model's template(s) and special tokens the way
// transformers does, choosing default / tool_use, and refusing bad inputs. Rendered outputs are
// checked against Python's jinja2 on the same template text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jinja2_reference.h"
#include "text/chat_template.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTemplates = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/chat/templates/";

class ModelDir {
 public:
  ModelDir() {
    static int n = 0;
    path_ = fs::temp_directory_path() /
            ("strata_chat_model_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path_);
  }
  ~ModelDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

nlohmann::ordered_json conversation() {
  return nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5}"},
    {"role": "user", "content": "Thanks"}])");
}

nlohmann::ordered_json tools() {
  return nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}])");
}

// The jinja2 rendering of `source` for this request, as the reference.
Jinja2Result reference(const std::string& source, const nlohmann::ordered_json& messages,
                       const nlohmann::ordered_json& tool_list, bool add_generation_prompt,
                       const nlohmann::ordered_json& kwargs, const nlohmann::ordered_json& bos,
                       const nlohmann::ordered_json& eos) {
  nlohmann::ordered_json c;
  c["source"] = source;
  c["messages"] = messages;
  c["tools"] = tool_list;
  c["add_generation_prompt"] = add_generation_prompt;
  c["kwargs"] = kwargs;
  c["bos_token"] = bos;
  c["eos_token"] = eos;
  const auto r = render_with_jinja2(nlohmann::ordered_json::array({c}));
  return r.empty() ? Jinja2Result{} : r[0];
}

TEST(ModelChatTemplates, TokenizerConfigStringTemplateAndAddedTokenObjects) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::string source = read_file(kTemplates + "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja");
  ModelDir dir;
  nlohmann::ordered_json config;
  config["bos_token"] = "<s>";
  config["eos_token"] = {{"__type", "AddedToken"}, {"content", "<|im_end|>"}, {"lstrip", false}};
  config["chat_template"] = source;
  dir.write("tokenizer_config.json", config.dump(2));

  const auto model = ModelChatTemplates::load(dir.path());
  ASSERT_EQ(model.templates().size(), 1u);
  EXPECT_EQ(model.bos_token(), std::optional<std::string>("<s>"));
  EXPECT_EQ(model.eos_token(), std::optional<std::string>("<|im_end|>"));
  int compared = 0;
  for (bool thinking : {true, false}) {
    const nlohmann::ordered_json kwargs = {{"enable_thinking", thinking}};
    const std::string got = model.render(conversation(), tools(), true, kwargs);
    const auto want = reference(source, conversation(), tools(), true, kwargs, "<s>", "<|im_end|>");
    ASSERT_TRUE(want.ok) << want.error;
    EXPECT_EQ(got, want.text);
    ++compared;
  }
  EXPECT_EQ(compared, 2);
}

TEST(ModelChatTemplates, NamedTemplatesChooseToolUseOnlyWithTools) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::string dflt =
      "default:{{ messages|length }}:{{ tools is none }}:{{ bos_token is defined }}";
  const std::string tool_use =
      "tool_use:{{ tools|length }}:{{ tools[0].function.name if tools else '' }}";
  ModelDir dir;
  nlohmann::ordered_json config;
  config["chat_template"] = nlohmann::ordered_json::array(
      {{{"name", "default"}, {"template", dflt}}, {{"name", "tool_use"}, {"template", tool_use}}});
  config["eos_token"] = "</s>";
  dir.write("tokenizer_config.json", config.dump());
  const auto model = ModelChatTemplates::load(dir.path());
  EXPECT_FALSE(model.bos_token().has_value());  // no bos_token key: undefined in the template

  const auto msgs = conversation();
  const auto without = reference(dflt, msgs, nullptr, false, {}, nullptr, "</s>");
  const auto with = reference(tool_use, msgs, tools(), false, {}, nullptr, "</s>");
  const auto with_empty =
      reference(tool_use, msgs, nlohmann::ordered_json::array(), false, {}, nullptr, "</s>");
  ASSERT_TRUE(without.ok && with.ok && with_empty.ok);
  EXPECT_EQ(model.render(msgs, nullptr, false, {}), without.text);
  EXPECT_EQ(model.render(msgs, tools(), false, {}), with.text);
  // An empty tools list still counts as "tools given" (transformers tests `tools is not None`).
  EXPECT_EQ(model.render(msgs, nlohmann::ordered_json::array(), false, {}), with_empty.text);
}

TEST(ModelChatTemplates, ChatTemplateJinjaFileWinsAndAdditionalTemplatesAreNamed) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::string in_config = "from tokenizer_config {{ messages[0].role }}";
  const std::string in_file = "from chat_template.jinja {{ messages[-1].content }}\n";
  const std::string extra = "extra {{ tools|length }}";
  ModelDir dir;
  dir.write("tokenizer_config.json", nlohmann::ordered_json{{"chat_template", in_config}}.dump());
  dir.write("chat_template.jinja", in_file);
  dir.write("additional_chat_templates/tool_use.jinja", extra);
  const auto model = ModelChatTemplates::load(dir.path());
  ASSERT_EQ(model.templates().size(), 2u);
  const auto want_file = reference(in_file, conversation(), nullptr, true, {}, nullptr, nullptr);
  const auto want_extra = reference(extra, conversation(), tools(), true, {}, nullptr, nullptr);
  ASSERT_TRUE(want_file.ok && want_extra.ok);
  EXPECT_EQ(model.render(conversation(), nullptr, true, {}), want_file.text);
  EXPECT_EQ(model.render(conversation(), tools(), true, {}), want_extra.text);
}

TEST(ModelChatTemplates, BadModelDirectoriesFailWithTheFileNamed) {
  {
    ModelDir dir;
    dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
    try {
      ModelChatTemplates::load(dir.path());
      ADD_FAILURE() << "loaded a model without a chat template";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
    }
    // Without require_template the special tokens alone load.
    EXPECT_EQ(ModelChatTemplates::load(dir.path(), {}, false).bos_token(),
              std::optional<std::string>("<s>"));
  }
  const std::pair<const char*, const char*> bad[] = {
      {"{not json", "not valid JSON"},
      {R"({"chat_template": 5})", "chat_template must be"},
      {R"({"chat_template": [{"name": "default"}]})", "list entries"},
      {R"({"chat_template": "{% if %}"})", "line 1"},
      {R"({"chat_template": "x", "eos_token": 7})", "eos_token"},
  };
  for (const auto& [config, needle] : bad) {
    ModelDir dir;
    dir.write("tokenizer_config.json", config);
    try {
      ModelChatTemplates::load(dir.path());
      ADD_FAILURE() << "loaded " << config;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_NE(msg.find("tokenizer_config.json"), std::string::npos) << msg;
    }
  }
  ModelDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  const auto model = ModelChatTemplates::load(dir.path());
  EXPECT_THROW(model.render(conversation(), nullptr, true, {}), Error);
  EXPECT_THROW(ModelChatTemplates::load(dir.path() / "missing"), Error);
}

TEST(ChatTemplate, ParseToolCallArgumentsTouchesOnlyAssistantArgumentStrings) {
  const auto in = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    {"role": "assistant", "tool_calls": [
      {"function": {"name": "f", "arguments": "{\"b\": [1, 2.5], \"c\": \"ü\"}"}},
      {"function": {"name": "g", "arguments": {"kept": true}}},
      {"function": {"name": "h", "arguments": null}},
      {"function": {"name": "i"}},
      {"function": {"name": "j", "arguments": "[1, \"two\"]"}}]}])");
  const auto out = parse_tool_call_arguments(in);
  EXPECT_EQ(out[0], in[0]);  // not an assistant message
  const auto& calls = out[1]["tool_calls"];
  EXPECT_EQ(calls[0]["function"]["arguments"],
            nlohmann::ordered_json::parse(R"({"b": [1, 2.5], "c": "ü"})"));
  EXPECT_EQ(calls[1]["function"]["arguments"], in[1]["tool_calls"][1]["function"]["arguments"]);
  EXPECT_EQ(calls[2]["function"]["arguments"], nlohmann::ordered_json::object());
  EXPECT_EQ(calls[3]["function"]["arguments"], nlohmann::ordered_json::object());
  EXPECT_EQ(calls[4]["function"]["arguments"], nlohmann::ordered_json::parse(R"([1, "two"])"));
  EXPECT_THROW(parse_tool_call_arguments(nlohmann::ordered_json::parse(
                   R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{"}}]}])")),
               Error);
}

// The fuzzer's seed corpus stays meaningful: valid_* parse, invalid_* do not.
TEST(ChatTemplate, FuzzCorpusSeedsParseAsNamed) {
  const fs::path dir = fs::path(STRATA_SOURCE_DIR) / "tests/fuzz/corpus/chat_template";
  int valid = 0, invalid = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string text = read_file(e.path().string());
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(ChatTemplate{text}) << name;
      ++valid;
    } else if (name.rfind("invalid_", 0) == 0) {
      EXPECT_THROW(ChatTemplate{text}, Error) << name;
      ++invalid;
    } else {
      ADD_FAILURE() << name << " is named neither valid_* nor invalid_*";
    }
  }
  EXPECT_GE(valid, 8);
  EXPECT_GE(invalid, 2);
}

TEST(ChatTemplate, ReservedKwargsAndMalformedInputsAreRefused) {
  const ChatTemplate t("{{ messages|length }}{{ extra }}");
  int refused = 0;
  for (const char* key : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token",
                          "chat_template", "tokenize"}) {
    try {
      t.render(conversation(), nullptr, true, nlohmann::ordered_json{{key, 1}}, "<s>", "</s>");
      ADD_FAILURE() << key << " was accepted as a kwarg";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 7);
  EXPECT_THROW(t.render(nlohmann::ordered_json::object(), nullptr, true, {}, "<s>", "</s>"), Error);
  EXPECT_THROW(t.render(conversation(), nlohmann::ordered_json::object(), true, {}, "<s>", "</s>"),
               Error);
  EXPECT_THROW(
      t.render(conversation(), nullptr, true, nlohmann::ordered_json::array(), "<s>", "</s>"),
      Error);
  EXPECT_THROW(t.render(nlohmann::ordered_json::parse("[9223372036854775808]"), nullptr, true, {},
                        "<s>", "</s>"),
               Error);
}

TEST(ChatTemplate, KwargsAndTokensReachTheTemplate) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::string source =
      "{{ bos_token }}|{{ eos_token }}|{{ extra }}|{{ documents }}|{{ add_generation_prompt }}|{{ "
      "tools }}";
  const nlohmann::ordered_json kwargs = {{"extra", {1, 2.5, "ü"}},
                                         {"documents", {{{"text", "d"}}}}};
  const auto want = reference(source, conversation(), tools(), true, kwargs, "<s>", "</s>");
  ASSERT_TRUE(want.ok) << want.error;
  EXPECT_EQ(ChatTemplate(source).render(conversation(), tools(), true, kwargs, "<s>", "</s>"),
            want.text);
  const auto want_no_tokens =
      reference(source, conversation(), nullptr, false, {}, nullptr, nullptr);
  ASSERT_TRUE(want_no_tokens.ok) << want_no_tokens.error;
  EXPECT_EQ(
      ChatTemplate(source).render(conversation(), nullptr, false, {}, std::nullopt, std::nullopt),
      want_no_tokens.text);
}

}  // namespace
}  // namespace strata::testing
