// The JSON-schema automaton on accept / reject tables: every text of a table is fed byte by
// byte; "accept" texts must be complete at their end, "prefix" texts alive but incomplete,
// "reject" texts dead at some byte (or alive but never complete: checked as not complete).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/json_schema_grammar.h"

namespace strata::text {
namespace {

using json = nlohmann::ordered_json;

enum class Want { Accept, Prefix, Reject };

struct Row {
  std::string text;
  Want want;
};

int check_table(const json& schema, const std::vector<Row>& rows) {
  JsonSchemaGrammar g(schema);
  int checked = 0;
  for (const Row& r : rows) {
    JsonGrammarState s(g);
    const bool alive = s.advance(r.text);
    switch (r.want) {
      case Want::Accept:
        EXPECT_TRUE(alive && s.complete()) << schema.dump() << " should accept " << r.text;
        break;
      case Want::Prefix:
        EXPECT_TRUE(alive && !s.complete()) << schema.dump() << " should be a prefix: " << r.text;
        break;
      case Want::Reject:
        EXPECT_FALSE(alive && s.complete()) << schema.dump() << " should reject " << r.text;
        EXPECT_FALSE(alive) << schema.dump() << " should be dead on " << r.text;
        break;
    }
    ++checked;
  }
  return checked;
}

constexpr Want A = Want::Accept, P = Want::Prefix, R = Want::Reject;

TEST(JsonSchemaGrammar, Scalars) {
  int n = 0;
  n += check_table({{"type", "string"}}, {{R"("")", A},
                                          {R"("a b")", A},
                                          {R"("\n\u00e9\"")", A},
                                          {"\"\xc3\xa9\"", A},
                                          {R"("abc)", P},
                                          {R"(")", P},
                                          {"\"\xc3", P},
                                          {R"("\u00)", P},
                                          {"\"a\nb\"", R},
                                          {R"("\x")", R},
                                          {"\"\xc3\x28\"", R},
                                          {"\"\xff\"", R},
                                          {"\"\xed\xa0\x80\"", R},
                                          {R"(abc)", R},
                                          {R"("a" )", R},
                                          {R"("a""b")", R}});
  n += check_table({{"type", "integer"}}, {{"0", A},
                                           {"-12", A},
                                           {"1234567", A},
                                           {"-", P},
                                           {"01", R},
                                           {"1.5", R},
                                           {"1e3", R},
                                           {"--1", R},
                                           {"+1", R},
                                           {"1 ", R}});
  n += check_table({{"type", "number"}}, {{"0", A},
                                          {"-0.5", A},
                                          {"1e10", A},
                                          {"2.5E-3", A},
                                          {"3e+7", A},
                                          {"1.", P},
                                          {"1e", P},
                                          {"1e-", P},
                                          {"-", P},
                                          {".5", R},
                                          {"1.e3", R},
                                          {"00", R},
                                          {"1ee", R},
                                          {"NaN", R}});
  n += check_table({{"type", "boolean"}},
                   {{"true", A}, {"false", A}, {"tru", P}, {"f", P}, {"True", R}, {"null", R}});
  n += check_table({{"type", "null"}}, {{"null", A}, {"nul", P}, {"nulll", R}, {"0", R}});
  n += check_table({{"enum", {"red", "green", 3, nullptr}}}, {{R"("red")", A},
                                                              {R"("green")", A},
                                                              {"3", A},
                                                              {"null", A},
                                                              {R"("gre)", P},
                                                              {R"("blue")", R},
                                                              {R"("redd")", R},
                                                              {"30", R}});
  n += check_table({{"const", "x\"y"}}, {{R"("x\"y")", A}, {R"("x\")", P}, {R"("xy")", R}});
  n += check_table({{"type", {"string", "null"}}},
                   {{R"("s")", A}, {"null", A}, {"1", R}, {"[]", R}});
  EXPECT_EQ(n, 16 + 10 + 14 + 6 + 4 + 8 + 3 + 4);
}

TEST(JsonSchemaGrammar, ObjectsWithoutAdditionalProperties) {
  json schema = {{"type", "object"},
                 {"properties",
                  {{"city", {{"type", "string"}}},
                   {"days", {{"type", "integer"}}},
                   {"unit", {{"enum", {"c", "f"}}}}}},
                 {"required", {"city"}},
                 {"additionalProperties", false}};
  int n =
      check_table(schema, {{R"({"city":"Paris"})", A},
                           {R"({ "city" : "Paris" , "days" : 3 })", A},
                           {R"({"days":3,"city":"x","unit":"f"})", A},
                           {"{\n  \"city\": \"a\"\n}", A},
                           {R"({"city":"Paris")", P},
                           {R"({"days":3)", P},
                           {R"({"ci)", P},
                           {R"({"days":3})", R},  // city is required
                           {R"({})", R},
                           {R"({"town":"x"})", R},             // no such property
                           {R"({"city":"a","city":"b"})", R},  // a property at most once
                           {R"({"city":1})", R},
                           {R"({"city":"a",})", R},
                           {R"({"city":"a","unit":"k"})", R},
                           {R"({"city":"a"}})", R},
                           {"{" + std::string(kMaxWhitespaceRun + 1, ' ') + "\"city\":\"a\"}", R}});
  EXPECT_EQ(n, 16);
}

TEST(JsonSchemaGrammar, ObjectsWithAdditionalPropertiesAndNesting) {
  int n = check_table({{"type", "object"}}, {{"{}", A},
                                             {R"({"a":[1,{"b":null}],"c":"d"})", A},
                                             {R"({"a":)", P},
                                             {R"({"a" 1})", R},
                                             {R"({a:1})", R},
                                             {"[]", R}});
  n += check_table(
      {{"type", "object"},
       {"properties", {{"n", {{"type", "integer"}}}}},
       {"additionalProperties", {{"type", "boolean"}}}},
      {{R"({"n":1,"x":true})", A}, {R"({"x":false})", A}, {R"({"x":1})", R}, {R"({"n":true})", R}});
  // Declared properties without additionalProperties: only those (strict, as vLLM's xgrammar).
  n += check_table({{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}},
                   {{R"({"n":1})", A}, {"{}", A}, {R"({"n":1,"x":2})", R}, {R"({"x":2})", R}});
  n += check_table(
      {{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 1}, {"maxItems", 2}},
      {{"[1]", A},
       {"[1, 2]", A},
       {"[", P},
       {"[1,", P},
       {"[]", R},
       {"[1,2,3]", R},
       {"[1,]", R},
       {"[\"a\"]", R}});
  n += check_table({{"anyOf", {{{"type", "integer"}}, {{"type", "array"}}}}},
                   {{"5", A}, {"[true]", A}, {"\"5\"", R}});
  n += check_table(json::object(), {{"12", A}, {"\"s\"", A}, {"{\"k\":[]}", A}, {"}", R}});
  EXPECT_EQ(n, 6 + 4 + 4 + 8 + 3 + 4);
}

TEST(JsonSchemaGrammar, RequiredToolsSchemaAcceptsOnlyDeclaredCalls) {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}}])");
  json schema = JsonSchemaGrammar::required_tools_schema(tools);
  int n = check_table(
      schema,
      {{R"([{"name":"get_weather","parameters":{"city":"Oslo"}}])", A},
       {R"([{"name":"now","parameters":{}},{"parameters":{"city":"x"},"name":"get_weather"}])", A},
       {R"([{"name":"now","parameters":{"x":1}}])", R},  // declared properties: none others
       {R"([{"name":"get_weather","parameters":{}}])", R},
       {R"([{"name":"sleep","parameters":{}}])", R},
       {R"([{"name":"now"}])", R},
       {R"([])", R},
       {R"([{"name":"get_weather","parameters":{"city":"Oslo"})", P}});
  EXPECT_EQ(n, 8);
}

TEST(JsonSchemaGrammar, BadSchemasAreRefused) {
  EXPECT_THROW(JsonSchemaGrammar(json(false)), std::exception);
  EXPECT_THROW(JsonSchemaGrammar(json(3)), std::exception);
  EXPECT_THROW(JsonSchemaGrammar(json{{"type", "tuple"}}), std::exception);
  EXPECT_THROW(JsonSchemaGrammar(json{{"enum", json::array()}}), std::exception);
  EXPECT_THROW((JsonSchemaGrammar(json{{"type", "array"}, {"minItems", 3}, {"maxItems", 1}})),
               std::exception);
}

}  // namespace
}  // namespace strata::text
