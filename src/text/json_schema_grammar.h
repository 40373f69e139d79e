// A JSON-schema-constrained grammar as a byte-level pushdown automaton, for guided decoding
// (tool_choice "required" or a named function, as vLLM constrains them).
//
// The schema subset compiled exactly:
//   type object  (properties, required, additionalProperties: false | true | a schema; absent
//                 means false when properties are declared, as xgrammar's strict mode that vLLM
//                 uses by default, and any when none are)
//   type array   (items, minItems, maxItems)
//   type string, number, integer, boolean, null; a list of types ("type": ["string", "null"])
//   enum, const  (matched as their compact JSON text, nlohmann's dump())
//   anyOf, oneOf (oneOf is treated as anyOf: exclusivity is not checked)
// Everything else falls back to "any JSON value of the right type": string formats, patterns
// and lengths, number ranges, $ref, allOf, not, patternProperties, uniqueItems are ignored (the
// output is still valid JSON of the declared type). A schema with no type is any JSON value.
//
// Whitespace between tokens is allowed in runs of at most kMaxWhitespaceRun bytes (so a model
// cannot stall the grammar in whitespace); nothing may follow the complete top-level value.
// Strings must be valid UTF-8 without raw control characters. A declared property may appear
// once; object keys of a schema without additional properties are pruned byte by byte to the
// names not yet used. The automaton is nondeterministic (anyOf, enum, additional properties):
// a state is the set of live alternatives, each a stack of frames.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::text {

constexpr int kMaxWhitespaceRun = 8;

struct SchemaNode;  // a compiled schema node (json_schema_grammar.cpp)
struct SchemaPool;  // owns a grammar's nodes

class JsonSchemaGrammar {
 public:
  // Compiles `schema` (throws strata::Error on a schema that is not an object or boolean).
  explicit JsonSchemaGrammar(const nlohmann::ordered_json& schema);
  // The schema vLLM uses for tool_choice "required": a non-empty array of
  // {"name": <one tool's name>, "parameters": <that tool's parameters>}.
  static nlohmann::ordered_json required_tools_schema(const nlohmann::ordered_json& tools);
  std::shared_ptr<const SchemaPool> pool() const { return pool_; }

 private:
  std::shared_ptr<const SchemaPool> pool_;
};

// The automaton's state over one grammar: feed bytes, ask whether it is dead or complete.
// Copyable (the token mask walks the vocabulary trie with copies).
class JsonGrammarState {
 public:
  explicit JsonGrammarState(const JsonSchemaGrammar& g);
  // Advances by one byte; false (and the state is dead) when no alternative accepts it.
  bool advance(uint8_t byte);
  bool advance(std::string_view bytes);
  bool dead() const { return alts_.empty(); }
  // The bytes so far form one complete value of the schema (EOS may be sampled now).
  bool complete() const;
  // Inside a string value's text (one alternative, no escape or character pending): a printable
  // ASCII byte other than '"' and '\\' leaves the state exactly as it is (the mask's fast path).
  bool in_plain_string() const;

  enum class Kind : uint8_t { Value, Literal, String, Key, Number, Object, Array };
  struct Frame {
    Kind kind = Kind::Value;
    uint8_t phase = 0;
    uint8_t left = 0;              // string: utf-8 continuation bytes or hex digits still due
    uint8_t lo = 0x80, hi = 0xBF;  // string: the range of the next utf-8 continuation byte
    int32_t count = 0;             // literal: bytes matched; array: items done
    int32_t which = 0;             // literal: the index of the literal matched
    const SchemaNode* node = nullptr;
    const SchemaNode* pending = nullptr;  // object: the schema of the value after the key
    std::vector<bool> seen;               // object: declared properties used
    std::string key;                      // key: its raw bytes so far
    bool operator==(const Frame&) const = default;
  };
  struct Alt {
    std::vector<Frame> frames;  // bottom first; empty = the value is complete
    int ws = 0;                 // whitespace bytes in the current run
    bool operator==(const Alt&) const = default;
  };

 private:
  std::shared_ptr<const SchemaPool> pool_;  // keeps the nodes the frames point to alive
  std::vector<Alt> alts_;
};

}  // namespace strata::text
