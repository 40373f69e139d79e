// Guided decoding end to end on the demo model (host): with tool_choice's schemas (a named
// function's parameters, and vLLM's "required" array), every seed's sampled output is one
// complete JSON value the schema accepts, finished by EOS ("stop"), or a valid prefix cut by
// max_tokens ("length"). The mask runs without the overlapped step; n > 1 completions keep
// their own grammar states.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "engine/engine.h"
#include "model/nemotron_h/load.h"
#include "text/generation_config.h"
#include "text/json_schema_grammar.h"
#include "text/tokenizer.h"

namespace strata::engine {
namespace {

using json = nlohmann::ordered_json;

struct Demo {
  std::unique_ptr<model::NemotronHModel> model;
  std::unique_ptr<text::Tokenizer> tok;
  EngineConfig config;
  Demo() {
    const std::string dir = std::string(STRATA_SOURCE_DIR) + "/models/demo";
    model = model::load_model(dir, Device::Host);
    tok = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(dir));
    config.executor.device = Device::Host;
    config.executor.max_num_seqs = 8;
    config.executor.max_model_len = 256;
    config.eos_ids = text::stop_token_ids(dir, tok.get(), false);
  }
};

const json& tools() {
  static const json t = json::parse(R"([
    {"type": "function", "function": {"name": "set_mode", "parameters": {"type": "object",
      "properties": {"mode": {"enum": ["eco", "sport", "comfort"]}, "loud": {"type": "boolean"},
                     "level": {"enum": [1, 2, 3]}},
      "required": ["mode", "loud"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "stop_all", "parameters": {"type": "object",
      "properties": {}, "additionalProperties": false}}}])");
  return t;
}

struct Result {
  std::string text;
  FinishReason finish = FinishReason::None;
};

std::vector<Result> generate(Demo& d, const json& schema, uint64_t seed, int32_t n,
                             int64_t max_tokens) {
  LLMEngine e(*d.model, d.tok.get(), d.config);
  EngineRequest r;
  r.id = "g";
  r.prompt = d.tok->encode("Call a tool: ", false);
  r.params.temperature = 1.f;
  r.params.seed = seed;
  r.params.n = n;
  r.params.max_tokens = max_tokens;
  r.params.guided_json = std::make_shared<const text::JsonSchemaGrammar>(schema);
  EXPECT_TRUE(e.add_request(std::move(r)));
  std::vector<Result> out(static_cast<size_t>(n));
  for (int steps = 0; e.has_unfinished() && steps < 10000; ++steps)
    for (const RequestOutput& o : e.step()) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      for (const CompletionDelta& c : o.completions) {
        out[static_cast<size_t>(c.index)].text += c.text;
        if (c.finish != FinishReason::None) out[static_cast<size_t>(c.index)].finish = c.finish;
      }
    }
  return out;
}

void expect_set_mode_arguments(const json& args, const std::string& text) {
  ASSERT_TRUE(args.is_object()) << text;
  ASSERT_TRUE(args.contains("mode") && args.contains("loud")) << text;
  for (const auto& [k, v] : args.items()) {
    if (k == "mode")
      EXPECT_TRUE(v == "eco" || v == "sport" || v == "comfort") << text;
    else if (k == "loud")
      EXPECT_TRUE(v.is_boolean()) << text;
    else if (k == "level")
      EXPECT_TRUE(v == 1 || v == 2 || v == 3) << text;
    else
      ADD_FAILURE() << "undeclared key " << k << " in " << text;
  }
}

TEST(EngineGuided, NamedFunctionGivesItsArgumentsForEverySeed) {
  Demo d;
  const json schema = tools()[0]["function"]["parameters"];
  int complete = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    // The schema bounds the value (enums, booleans, whitespace runs): 200 tokens always end it.
    for (const Result& r : generate(d, schema, seed, /*n=*/2, /*max_tokens=*/200)) {
      ASSERT_EQ(r.finish, FinishReason::Stop) << "seed " << seed << ": " << r.text;
      const json args = json::parse(r.text, nullptr, false);
      ASSERT_FALSE(args.is_discarded()) << "seed " << seed << ": " << r.text;
      expect_set_mode_arguments(args, r.text);
      ++complete;
    }
  }
  EXPECT_EQ(complete, 24);
}

TEST(EngineGuided, RequiredGivesANonEmptyArrayOfDeclaredCalls) {
  Demo d;
  const json schema = text::JsonSchemaGrammar::required_tools_schema(tools());
  int complete = 0, cut = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const Result r = generate(d, schema, seed, 1, 200)[0];
    if (r.finish == FinishReason::Length) {
      // The array has no maxItems: a model may keep adding calls until max_tokens.
      text::JsonSchemaGrammar g(schema);
      text::JsonGrammarState s(g);
      EXPECT_TRUE(s.advance(r.text)) << r.text;
      ++cut;
      continue;
    }
    ASSERT_EQ(r.finish, FinishReason::Stop) << "seed " << seed << ": " << r.text;
    const json calls = json::parse(r.text, nullptr, false);
    ASSERT_TRUE(calls.is_array() && !calls.empty()) << r.text;
    for (const json& c : calls) {
      ASSERT_TRUE(c.contains("name") && c.contains("parameters")) << r.text;
      if (c["name"] == "set_mode")
        expect_set_mode_arguments(c["parameters"], r.text);
      else
        EXPECT_TRUE(c["name"] == "stop_all" && c["parameters"] == json::object() && c.size() == 2)
            << r.text;
    }
    ++complete;
  }
  EXPECT_EQ(complete + cut, 12);
  // Measured: 10 of the 12 seeds close the array within 200 tokens, 2 keep adding calls.
  EXPECT_GE(complete, 6) << "most seeds should close the array well within 200 tokens";
}

TEST(EngineGuided, MaxTokensMidValueEndsWithLength) {
  Demo d;
  const json schema = tools()[0]["function"]["parameters"];
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Result r = generate(d, schema, seed, 1, 3)[0];
    EXPECT_EQ(r.finish, FinishReason::Length) << r.text;
    text::JsonSchemaGrammar g(schema);
    text::JsonGrammarState s(g);
    EXPECT_TRUE(s.advance(r.text)) << r.text;
    EXPECT_FALSE(s.complete()) << r.text;
  }
}

}  // namespace
}  // namespace strata::engine
