// Issue 12 part 1: parsers of outside input refuse what would take memory proportional to a
// number in the file, nest without bound or say two things under one key; and the fuzzers'
// seed corpora stay meaningful (valid_* parse, invalid_* are refused).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "cache/cache_plan.h"
#include "chat_request.h"
#include "core/check.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "model/nemotron_h/admission.h"
#include "model/nemotron_h/config.h"
#include "text/tokenizer.h"
#include "text/tokenizer_ids.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParserHardening, TokenIdsBoundedByTheFileThatDeclaresThem) {
  // One added token with id 10^9 used to size a 10^9-entry table (4 GB, vector::_M_fill_insert).
  const std::string added = error_of([] {
    text::Tokenizer::from_json_text(
        R"({"added_tokens": [{"id": 1000000000, "content": "<big>", "special": true}],
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})",
        "t.json");
  });
  EXPECT_NE(added.find("t.json: added_tokens[0].id 1000000000 is far beyond the 3 tokens"),
            std::string::npos)
      << added;
  const std::string vocab = error_of([] {
    text::Tokenizer::from_json_text(
        R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000000}, "merges": []}})",
        "v.json");
  });
  EXPECT_NE(vocab.find("v.json: model.vocab: id 2000000000 is far beyond the 2 tokens"),
            std::string::npos)
      << vocab;
  // Gaps within the allowance load (ids stay below declared + 65536).
  EXPECT_NO_THROW(text::Tokenizer::from_json_text(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 60000}, "merges": []}})", "gap.json"));
  const std::string deep = error_of([] {
    text::Tokenizer::from_json_text(std::string(100000, '[') + std::string(100000, ']'), "d.json");
  });
  EXPECT_NE(deep.find("d.json: JSON nests deeper than the 64 levels"), std::string::npos) << deep;
}

TEST(ParserHardening, ConfigIntegersBoundedAndDuplicatesRefused) {
  const fs::path golden =
      fs::path(STRATA_SOURCE_DIR) / "tests/fixtures/golden/moe_f32_grouped/config.json";
  std::string text = io::read_text_file(golden.string(), "config", io::kConfigMaxBytes);
  const model::ModelConfig ok = model::ModelConfig::from_json_text(text, "c.json");
  // The double count agrees with the engine's integer count on a real config.
  EXPECT_EQ(model::parameter_count_f64(ok), static_cast<double>(model::parameter_count(ok)));
  const auto with = [&](const std::string& field, const std::string& value) {
    std::string t = text;
    const size_t at = t.find("\"" + field + "\"");
    EXPECT_NE(at, std::string::npos) << field;
    const size_t colon = t.find(':', at), end = t.find_first_of(",}", colon);
    return t.replace(colon + 1, end - colon - 1, " " + value);
  };
  const std::string huge = error_of(
      [&] { model::ModelConfig::from_json_text(with("hidden_size", "1099511627776"), "c.json"); });
  EXPECT_NE(huge.find("c.json: field hidden_size = 1099511627776 is above the limit 16777216"),
            std::string::npos)
      << huge;
  const std::string neg = error_of(
      [&] { model::ModelConfig::from_json_text(with("hidden_size", "-1099511627776"), "c.json"); });
  EXPECT_NE(neg.find("field hidden_size = -1099511627776 is outside [-16777216, 16777216]"),
            std::string::npos)
      << neg;
  const std::string u64 = error_of([&] {
    model::ModelConfig::from_json_text(with("vocab_size", "18446744073709551615"), "c.json");
  });
  EXPECT_NE(u64.find("field vocab_size = 18446744073709551615 is above the limit 2147483647"),
            std::string::npos)
      << u64;
  // hidden_size 10^6 parses (within bounds); admission refuses it later with figures.
  const model::ModelConfig wide =
      model::ModelConfig::from_json_text(with("hidden_size", "1000000"), "c.json");
  EXPECT_GT(model::parameter_count_f64(wide), 1e9);
  const std::string dup = error_of([&] {
    model::ModelConfig::from_json_text(R"({"hidden_size": 8, "hidden_size": 16})", "c.json");
  });
  EXPECT_NE(dup.find("c.json: duplicate key \"hidden_size\""), std::string::npos) << dup;
}

TEST(ParserHardening, IdListsNameTheElement) {
  EXPECT_EQ(text::parse_id_json("[1, 2, 2147483647]", "stdin"),
            (std::vector<int32_t>{1, 2, 2147483647}));
  EXPECT_EQ(text::parse_id_csv("7,0", "--ids"), (std::vector<int32_t>{7, 0}));
  const std::string neg = error_of([] { text::parse_id_json("[1, -2]", "stdin"); });
  EXPECT_NE(neg.find("stdin: element 1 is not a non-negative 32-bit token id: \"-2\""),
            std::string::npos)
      << neg;
  const std::string big = error_of([] { text::parse_id_csv("1,4294967296", "--ids"); });
  EXPECT_NE(big.find("--ids: \"4294967296\" is not a non-negative 32-bit token id"),
            std::string::npos)
      << big;
  const std::string nested = error_of([] { text::parse_id_json("[[[1]]]", "stdin"); });
  EXPECT_NE(nested.find("nests deeper than the 2 levels"), std::string::npos) << nested;
}

// Caches are admitted before their pools allocate: a plan far beyond any machine is refused with
// the figures, and nothing is allocated (the test would be killed otherwise).
TEST(ParserHardening, CacheAdmittedBeforeAllocation) {
  const model::ModelConfig c = model::ModelConfig::preset("nemotron-h-56b");
  const cache::CachePlan plan = cache::plan_cache_for_tokens(c, 4096, 1 << 24, 16, DType::BF16);
  EXPECT_GT(plan.kv_bytes, size_t{1} << 50);  // petabytes
  const std::string e = error_of([&] { cache::ModelCache cache(c, plan, Device::Host); });
  EXPECT_NE(e.find("the cache (4096 state slots, "), std::string::npos) << e;
  EXPECT_NE(e.find("of host memory"), std::string::npos) << e;
  EXPECT_NE(e.find("refusing before allocating"), std::string::npos) << e;
  // A plan that overflows 64 bits is refused by the planner itself.
  const std::string o = error_of([&] {
    cache::plan_cache_for_tokens(c, int64_t{1} << 40, int64_t{1} << 40, 16, DType::BF16);
  });
  EXPECT_NE(o.find("cache plan:"), std::string::npos) << o;
  // A small plan passes and allocates.
  EXPECT_NO_THROW(
      cache::ModelCache(model::ModelConfig::preset("nemotron-h-4b"),
                        cache::plan_cache_for_tokens(model::ModelConfig::preset("nemotron-h-4b"), 1,
                                                     16, 16, DType::BF16),
                        Device::Host));
}

// valid_* inputs are accepted and invalid_* refused by the parser each fuzzer drives.
void check_corpus(const std::string& name, const std::function<void(const std::string&)>& parse,
                  size_t want_valid, size_t want_invalid) {
  const fs::path dir = fs::path(STRATA_SOURCE_DIR) / "tests/fuzz/corpus" / name;
  size_t valid = 0, invalid = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    SCOPED_TRACE(name + "/" + file);
    const std::string text = io::read_text_file(e.path().string(), "seed", 1 << 20);
    if (file.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(parse(text));
      ++valid;
    } else {
      EXPECT_EQ(file.rfind("invalid_", 0), 0u);
      EXPECT_THROW(parse(text), Error);
      ++invalid;
    }
  }
  EXPECT_EQ(valid, want_valid) << name;
  EXPECT_EQ(invalid, want_invalid) << name;
}

TEST(ParserHardening, FuzzSeedCorporaAreClassifiedByName) {
  check_corpus(
      "config", [](const std::string& t) { model::ModelConfig::from_json_text(t, "seed"); }, 3, 4);
  check_corpus(
      "tokenizer", [](const std::string& t) { text::Tokenizer::from_json_text(t, "seed"); }, 6, 2);
  check_corpus(
      "chat_request", [](const std::string& t) { cli::parse_chat_request(t, false); }, 9, 3);
  check_corpus(
      "id_list", [](const std::string& t) { text::parse_id_json(t, "seed"); }, 2, 5);
}

}  // namespace
}  // namespace strata
