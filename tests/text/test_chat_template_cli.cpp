// `strata chat-template --model DIR` as a user runs it: the real binary, a request on stdin, the
// prompt on stdout, compared with Python's jinja2 rendering of the same request.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jinja2_reference.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int rc = -1;
  std::string out, err;
};

CliResult run_strata(const std::string& args, const std::string& stdin_text, const fs::path& dir) {
  std::ofstream(dir / "stdin", std::ios::binary) << stdin_text;
  const std::string cmd = std::string("'") + STRATA_BINARY + "' " + args + " <'" +
                          (dir / "stdin").string() + "' >'" + (dir / "stdout").string() + "' 2>'" +
                          (dir / "stderr").string() + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file((dir / "stdout").string());
  r.err = read_file((dir / "stderr").string());
  return r;
}

class ChatTemplateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_chat_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_ / "model");
    template_path_ = std::string(STRATA_SOURCE_DIR) +
                     "/tests/fixtures/chat/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja";
    nlohmann::ordered_json config;
    config["bos_token"] = "<s>";
    config["eos_token"] = "<|im_end|>";
    config["chat_template"] = read_file(template_path_);
    std::ofstream(dir_ / "model" / "tokenizer_config.json", std::ios::binary) << config.dump(1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string template_path_;
};

TEST_F(ChatTemplateCli, RendersTheRequestLikeJinja2) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const auto request = nlohmann::ordered_json::parse(R"({
    "model": "ignored",
    "messages": [{"role": "system", "content": "Sé breve."},
                 {"role": "user", "content": "Weather in Paris?"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5]}}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "21 °C"},
                 {"role": "user", "content": "And tomorrow? 🌦"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "chat_template_kwargs": {"enable_thinking": false}})");
  int compared = 0;
  for (const bool explicit_no_gen : {false, true}) {
    auto req = request;
    if (explicit_no_gen) req["add_generation_prompt"] = false;
    nlohmann::ordered_json c;
    c["template"] = template_path_;
    c["messages"] = req["messages"];
    c["tools"] = req["tools"];
    c["add_generation_prompt"] = !explicit_no_gen;  // the command's default is true
    c["kwargs"] = req["chat_template_kwargs"];
    c["bos_token"] = "<s>";
    c["eos_token"] = "<|im_end|>";
    const auto want = render_with_jinja2(nlohmann::ordered_json::array({c}));
    ASSERT_EQ(want.size(), 1u);
    ASSERT_TRUE(want[0].ok) << want[0].error;
    const CliResult r =
        run_strata("chat-template --model '" + (dir_ / "model").string() + "'", req.dump(), dir_);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, want[0].text);
    ++compared;
  }
  EXPECT_EQ(compared, 2);
}

// OpenAI clients send tool-call arguments as JSON strings; like vLLM the command parses them, so
// the Nemotron 3 template (which iterates `arguments | items`) renders them as it renders objects.
TEST_F(ChatTemplateCli, ArgumentStringsAreParsedLikeVllm) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const char* as_strings = R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": [1, 2]}"}},
        {"id": "b", "type": "function", "function": {"name": "ping", "arguments": ""}}]},
      {"role": "tool", "content": "21"}], "documents": [{"text": "doc"}]})";
  const char* as_objects = R"([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}},
        {"id": "b", "type": "function", "function": {"name": "ping", "arguments": {}}}]},
      {"role": "tool", "content": "21"}])";
  nlohmann::ordered_json c;
  c["template"] = template_path_;
  c["messages"] = nlohmann::ordered_json::parse(as_objects);
  c["add_generation_prompt"] = true;
  c["kwargs"] = {{"documents", {{{"text", "doc"}}}}};
  c["bos_token"] = "<s>";
  c["eos_token"] = "<|im_end|>";
  const auto want = render_with_jinja2(nlohmann::ordered_json::array({c}));
  ASSERT_EQ(want.size(), 1u);
  ASSERT_TRUE(want[0].ok) << want[0].error;
  const std::string model = "chat-template --model '" + (dir_ / "model").string() + "'";
  const CliResult r = run_strata(model, as_strings, dir_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, want[0].text);
  // Kept as strings, the template's `| items` fails, as it does in transformers.
  const CliResult kept = run_strata(model + " --keep-argument-strings", as_strings, dir_);
  EXPECT_EQ(kept.rc, 1);
  EXPECT_NE(kept.err.find("mapping"), std::string::npos) << kept.err;
  const CliResult bad = run_strata(
      model,
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})",
      dir_);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("messages[0].tool_calls[0].function.arguments"), std::string::npos)
      << bad.err;
}

TEST_F(ChatTemplateCli, TemplateFileOverridesTheModels) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::string other =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}{{ eos_token }}";
  std::ofstream(dir_ / "other.jinja", std::ios::binary) << other;
  const CliResult r = run_strata("chat-template --model '" + (dir_ / "model").string() +
                                     "' --template '" + (dir_ / "other.jinja").string() + "'",
                                 R"({"messages": [{"role": "user", "content": "x"}]})", dir_);
  EXPECT_EQ(r.rc, 0) << r.err;
  nlohmann::ordered_json c;
  c["source"] = other;
  c["messages"] = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  c["add_generation_prompt"] = true;
  c["bos_token"] = "<s>";
  c["eos_token"] = "<|im_end|>";
  const auto want = render_with_jinja2(nlohmann::ordered_json::array({c}));
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(r.out, want[0].text);
}

TEST_F(ChatTemplateCli, BadRequestsFailWithAOneLineError) {
  const std::string model = "chat-template --model '" + (dir_ / "model").string() + "'";
  const std::pair<std::string, std::string> bad[] = {
      {"not json", "not valid JSON"},
      {"[1]", "JSON object"},
      {R"({"tools": []})", "messages"},
      {R"({"messages": {}})", "messages must be a JSON array"},
      {R"({"messages": [], "add_generation_prompt": "yes"})", "add_generation_prompt"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tools": []}})",
       "reserved"},
      {R"({"messages": []})", "line "},  // the template itself fails on an empty conversation
  };
  int checked = 0;
  for (const auto& [stdin_text, needle] : bad) {
    const CliResult r = run_strata(model, stdin_text, dir_);
    EXPECT_EQ(r.rc, 1) << stdin_text;
    EXPECT_EQ(r.err.rfind("strata: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << stdin_text << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    ++checked;
  }
  EXPECT_EQ(checked, 7);
  const CliResult missing = run_strata("chat-template --model '" + (dir_ / "nope").string() + "'",
                                       R"({"messages": []})", dir_);
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("not a directory"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace strata::testing
