// The guided-decoding token mask against brute force on the demo tokenizer: for states along
// valid documents of several schemas, the trie walk's mask must equal, bit for bit, the mask
// found by feeding every token's bytes to a copy of the state. Also: the vocabulary's byte
// strings concatenate back to the text they encode (multi-byte characters split over tokens).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "text/grammar_mask.h"
#include "text/token_bytes.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

using json = nlohmann::ordered_json;

Tokenizer demo_tokenizer() {
  return Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) + "/models/demo");
}

TEST(GrammarMask, VocabularyBytesConcatenateToTheEncodedText) {
  const Tokenizer tok = demo_tokenizer();
  const auto bytes = vocabulary_bytes(tok);
  int checked = 0;
  for (const std::string text :
       {"{\"city\": \"Zürich\", \"n\": -12.5e3}", "plain words and 数字 \xF0\x9F\x98\x80 emoji",
        "tabs\tand\nnewlines \\\" escapes"}) {
    std::string joined;
    for (int32_t id : tok.encode(text, false)) {
      ASSERT_TRUE(bytes[static_cast<size_t>(id)].has_value()) << "token " << id;
      joined += *bytes[static_cast<size_t>(id)];
    }
    EXPECT_EQ(joined, text);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(GrammarMask, TrieMaskEqualsBruteForceOnTheDemoVocabulary) {
  const Tokenizer tok = demo_tokenizer();
  const auto bytes = vocabulary_bytes(tok);
  const TokenTrie trie(bytes);
  const std::vector<int32_t> eos = {tok.eos_token_id().value_or(0)};
  const int64_t V = tok.vocab_size() + 37;  // padded logits: the extra ids stay banned
  const int64_t W = (V + 31) / 32;

  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"enum": ["celsius", "fahrenheit"]}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}])");
  struct Doc {
    json schema;
    std::string text;
  };
  const std::vector<Doc> docs = {
      {JsonSchemaGrammar::required_tools_schema(tools),
       R"([{"name": "get_weather", "parameters": {"city": "Zürich", "days": 3, "unit": "celsius"}}, {"name":"now","parameters":{"tz":[1.5e2,null,true]}}])"},
      {tools[0]["function"]["parameters"], "{\"days\": -20, \"city\": \"a\\\"b\\u00e9\"}"},
      {json{{"type", "number"}}, "-0.25e+12"},
  };
  int64_t states = 0, bits = 0, allowed_total = 0;
  for (const Doc& d : docs) {
    const JsonSchemaGrammar g(d.schema);
    JsonGrammarState s(g);
    for (size_t i = 0; i <= d.text.size(); ++i) {
      std::vector<uint32_t> fast(static_cast<size_t>(W), 0xDEADBEEFu);
      trie.mask(s, eos, V, fast.data());
      std::vector<uint32_t> slow(static_cast<size_t>(W), 0);
      for (int64_t id = 0; id < static_cast<int64_t>(bytes.size()); ++id) {
        const auto& b = bytes[static_cast<size_t>(id)];
        if (!b) continue;
        JsonGrammarState t = s;
        if (t.advance(*b)) slow[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
      }
      if (s.complete())
        for (int32_t id : eos)
          slow[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
      for (int64_t w = 0; w < W; ++w) {
        ASSERT_EQ(fast[static_cast<size_t>(w)], slow[static_cast<size_t>(w)])
            << d.schema.dump() << " after " << d.text.substr(0, i) << ": word " << w;
        allowed_total += __builtin_popcount(slow[static_cast<size_t>(w)]);
      }
      bits += V;
      ++states;
      if (i < d.text.size()) {
        ASSERT_TRUE(s.advance(static_cast<uint8_t>(d.text[i])));
      }
    }
    EXPECT_TRUE(s.complete());
  }
  EXPECT_EQ(states, static_cast<int64_t>(docs[0].text.size() + docs[1].text.size() +
                                         docs[2].text.size() + 3));
  EXPECT_EQ(bits, states * V);
  // Inside strings most of the vocabulary is allowed, elsewhere little: the masks are not trivial.
  EXPECT_GT(allowed_total, states);
  EXPECT_LT(allowed_total, bits / 2);
}

// The real Nemotron vocabulary (131k tokens): the mask is exact against brute force at a few
// states (inside a key, inside a string value, between values), and its cost is reported.
TEST(GrammarMask, NemotronVocabularyMaskIsExactAndItsCostIsReported) {
  const Tokenizer tok = Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) +
                                            "/tests/fixtures/tokenizers/nemotron_131k");
  const auto bytes = vocabulary_bytes(tok);
  const TokenTrie trie(bytes);
  const int64_t V = tok.vocab_size(), W = (V + 31) / 32;
  const std::vector<int32_t> eos = {2};
  const json schema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false})");
  const JsonSchemaGrammar g(schema);
  int compared = 0;
  for (const std::string prefix : {"{\"ci", "{\"city\": \"Ber", "{\"city\": \"Berlin\", "}) {
    JsonGrammarState s(g);
    ASSERT_TRUE(s.advance(prefix));
    std::vector<uint32_t> fast(static_cast<size_t>(W));
    const auto t0 = std::chrono::steady_clock::now();
    trie.mask(s, eos, V, fast.data());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<uint32_t> slow(static_cast<size_t>(W), 0);
    int64_t allowed = 0;
    for (int64_t id = 0; id < static_cast<int64_t>(bytes.size()); ++id) {
      const auto& b = bytes[static_cast<size_t>(id)];
      JsonGrammarState t = s;
      if (b && t.advance(*b)) {
        slow[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
        ++allowed;
      }
    }
    EXPECT_EQ(fast, slow) << prefix;
    std::printf("mask after %-28s %6lld of %lld tokens allowed, %.2f ms (trie of %lld nodes)\n",
                prefix.c_str(), static_cast<long long>(allowed), static_cast<long long>(V), ms,
                static_cast<long long>(trie.num_nodes()));
    ++compared;
  }
  EXPECT_EQ(compared, 3);
}

}  // namespace
}  // namespace strata::text
