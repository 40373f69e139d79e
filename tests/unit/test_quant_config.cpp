// ModelOpt quantization settings: the NVFP4 and FP8 layouts of spec/nemotron_h.md 2.2 / 2.3,
// exclusion decisions checked against the spec's lists written as sets of layer numbers, the
// wildcard matcher against std::regex on random patterns, directory precedence, and errors.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "core/check.h"
#include "io/module_pattern.h"
#include "io/quant_config.h"
#include "test_safetensors_util.h"

namespace strata::io {
namespace {

using test::ScratchDir;

void write_text(const std::string& path, const std::string& text) {
  test::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected \"" << fragments.front() << "\"";
  } catch (const Error& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << frag << "\"";
  }
}

// Nano-3 (52 layers) exclusion sets from spec 2.3.
const std::set<int> kBf16Mamba = {4, 11, 18, 25, 32, 41};
const std::set<int> kAttention = {5, 12, 19, 26, 33, 42};
const std::set<int> kMambaLayers = {0,  2,  4,  7,  9,  11, 14, 16, 18, 21, 23, 25,
                                    28, 30, 32, 35, 37, 39, 41, 44, 46, 48, 50};

// The NVFP4 hf_quant_config.json of spec 2.3, exclude list spelled out module by module.
std::string nvfp4_hf_quant_config() {
  nlohmann::json ex = nlohmann::json::array({"lm_head"});
  for (int l : kBf16Mamba)
    for (const char* m : {"in_proj", "out_proj"})
      ex.push_back(fmt::format("backbone.layers.{}.mixer.{}", l, m));
  for (int l : kAttention)
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"})
      ex.push_back(fmt::format("backbone.layers.{}.mixer.{}", l, m));
  for (int l : kMambaLayers)
    ex.push_back(fmt::format("backbone.layers.{}.mixer.conv1d", l));
  return nlohmann::json{{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}},
                        {"quantization",
                         {{"quant_algo", "NVFP4"},
                          {"kv_cache_quant_algo", "FP8"},
                          {"group_size", 16},
                          {"exclude_modules", ex}}}}
      .dump(2);
}

const std::vector<std::string> kModuleKinds = {"in_proj",
                                               "out_proj",
                                               "q_proj",
                                               "k_proj",
                                               "v_proj",
                                               "o_proj",
                                               "conv1d",
                                               "experts.0.up_proj",
                                               "experts.127.down_proj",
                                               "shared_experts.up_proj",
                                               "gate"};

bool spec_excludes(int layer, const std::string& kind) {
  if (kind == "in_proj" || kind == "out_proj") return kBf16Mamba.count(layer) > 0;
  if (kind == "q_proj" || kind == "k_proj" || kind == "v_proj" || kind == "o_proj")
    return kAttention.count(layer) > 0;
  if (kind == "conv1d") return kMambaLayers.count(layer) > 0;
  return false;
}

TEST(QuantConfig, Nvfp4ReleaseLayout) {
  const QuantConfig q = parse_hf_quant_config(nvfp4_hf_quant_config(), "hf_quant_config.json");
  EXPECT_EQ(q.algo, QuantAlgo::NVFP4);
  EXPECT_EQ(q.kv_cache_algo, QuantAlgo::FP8);
  EXPECT_EQ(q.group_size, 16);
  EXPECT_EQ(q.producer, "modelopt 0.29.0");
  EXPECT_EQ(q.source, "hf_quant_config.json");
  EXPECT_EQ(q.exclude_modules.size(), 1u + 12u + 24u + 23u);
  EXPECT_TRUE(q.quantized());
  int checked = 0, excluded = 0;
  for (int layer = 0; layer < 52; ++layer)
    for (const auto& kind : kModuleKinds) {
      const std::string name = fmt::format("backbone.layers.{}.mixer.{}", layer, kind);
      const bool want = spec_excludes(layer, kind);
      EXPECT_EQ(q.is_excluded(name), want) << name;
      ++checked;
      excluded += want;
    }
  EXPECT_EQ(checked, 52 * 11);
  EXPECT_EQ(excluded, 12 + 24 + 23);
  EXPECT_TRUE(q.is_excluded("lm_head"));
  EXPECT_FALSE(q.is_excluded("backbone.embeddings"));
  EXPECT_EQ(q.describe(),
            "NVFP4 (group 16), KV cache FP8, 60 excluded pattern(s), from hf_quant_config.json "
            "(modelopt 0.29.0)");
}

// Spec 2.2's FP8 layout, written with wildcards as ModelOpt does, in config.json.
TEST(QuantConfig, Fp8InConfigJsonWithWildcards) {
  const auto qc = nlohmann::json::parse(R"({
    "quant_method": "modelopt", "quant_algo": "fp8", "kv_cache_quant_algo": "FP8",
    "exclude_modules": ["lm_head", "backbone.layers.*.mixer.conv1d",
                        "backbone.layers.5.mixer.*_proj", "backbone.layers.4.mixer.?n_proj",
                        "backbone.layers.1[18].mixer.*"]})");
  const QuantConfig q = parse_quantization_config(qc, "config.json");
  EXPECT_EQ(q.algo, QuantAlgo::FP8);  // lower case accepted, as vLLM upper-cases
  EXPECT_EQ(q.kv_cache_algo, QuantAlgo::FP8);
  EXPECT_EQ(q.group_size, 0);
  struct Want {
    const char* module;
    bool excluded;
  };
  const Want cases[] = {
      {"lm_head", true},
      {"backbone.layers.0.mixer.conv1d", true},
      {"backbone.layers.50.mixer.conv1d", true},
      {"backbone.layers.5.mixer.q_proj", true},
      {"backbone.layers.5.mixer.o_proj", true},
      {"backbone.layers.50.mixer.q_proj", false},
      {"backbone.layers.4.mixer.in_proj", true},
      {"backbone.layers.4.mixer.out_proj", false},  // '?' is exactly one character
      {"backbone.layers.11.mixer.in_proj", true},
      {"backbone.layers.18.mixer.out_proj", true},
      {"backbone.layers.12.mixer.in_proj", false},
      {"backbone.layers.3.mixer.experts.7.up_proj", false},
  };
  int checked = 0;
  for (const auto& c : cases) {
    EXPECT_EQ(q.is_excluded(c.module), c.excluded) << c.module;
    ++checked;
  }
  EXPECT_EQ(checked, 12);
}

// vLLM's other rules: a pattern that is a substring excludes (older ModelOpt exports), and
// "x*" also counts as the substring "x".
TEST(QuantConfig, VllmSubstringRules) {
  QuantConfig q;
  q.exclude_modules = {"backbone.layers.7.mixer", "vision*"};
  EXPECT_TRUE(q.is_excluded("backbone.layers.7.mixer.in_proj"));
  EXPECT_FALSE(q.is_excluded("backbone.layers.8.mixer.in_proj"));
  EXPECT_TRUE(q.is_excluded("model.vision_tower.proj"));  // "vision" substring via "vision*"
  EXPECT_FALSE(q.is_excluded("backbone.layers.0.mixer.in_proj"));
}

TEST(QuantConfig, CompressedTensorsStyleConfigJson) {
  const auto qc = nlohmann::json::parse(R"({
    "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
    "kv_cache_scheme": {"type": "float", "num_bits": 8, "dynamic": false},
    "ignore": ["lm_head", "backbone.layers.*.mixer.conv1d"],
    "producer": {"name": "modelopt", "version": "0.39.0"}})");
  const QuantConfig q = parse_quantization_config(qc, "config.json");
  EXPECT_EQ(q.algo, QuantAlgo::NVFP4);
  EXPECT_EQ(q.kv_cache_algo, QuantAlgo::FP8);
  EXPECT_EQ(q.exclude_modules,
            (std::vector<std::string>{"lm_head", "backbone.layers.*.mixer.conv1d"}));
  EXPECT_EQ(q.producer, "modelopt 0.39.0");
  // the hf_quant_config.json layout nested in config.json
  const auto nested = nlohmann::json::parse(R"({"quant_method": "modelopt",
    "quantization": {"quant_algo": "FP8", "exclude_modules": null}})");
  const QuantConfig n = parse_quantization_config(nested, "config.json");
  EXPECT_EQ(n.algo, QuantAlgo::FP8);
  EXPECT_EQ(n.kv_cache_algo, QuantAlgo::None);
  EXPECT_TRUE(n.exclude_modules.empty());
}

TEST(QuantConfig, UnsupportedAndMalformed) {
  const std::string f = "hf_quant_config.json";
  auto hf = [](const std::string& quantization) {
    return "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": " + quantization + "}";
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> hf_cases = {
      {hf(R"({"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"})"),
       {f, "quantization.quant_algo \"FP8_PER_CHANNEL_PER_TOKEN\" is not supported"}},
      {hf(R"({"quant_algo": "W4A16_AWQ", "group_size": 128})"),
       {f, "\"W4A16_AWQ\" is not supported"}},
      {hf(R"({"quant_algo": "MIXED_PRECISION"})"), {"\"MIXED_PRECISION\" is not supported"}},
      {hf(R"({"quant_algo": "W4A16_NVFP4"})"), {"\"W4A16_NVFP4\" is not supported"}},
      {hf(R"({"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"})"),
       {f, "kv_cache_quant_algo \"NVFP4\" is not supported"}},
      {hf(R"({"quant_algo": "NVFP4", "group_size": 32})"), {f, "group_size 32 is not supported"}},
      {hf(R"({"quant_algo": "NVFP4", "group_size": "16"})"), {"group_size is a JSON string"}},
      {hf(R"({"quant_algo": null})"), {f, "quantization.quant_algo is missing"}},
      {hf(R"({"kv_cache_quant_algo": "FP8"})"), {"quant_algo is missing"}},
      {hf(R"({"quant_algo": 8})"), {"quantization.quant_algo is a JSON number, not a string"}},
      {hf(R"({"quant_algo": "FP8", "exclude_modules": "lm_head"})"),
       {"quantization.exclude_modules is a JSON string, not a list"}},
      {hf(R"({"quant_algo": "FP8", "exclude_modules": ["lm_head", 3]})"),
       {"quantization.exclude_modules[1] is a JSON number"}},
      {hf("[1]"), {"quantization is a JSON array, not an object"}},
      {"{\"producer\": {}}", {f, "has no \"quantization\" object"}},
      {"[]", {f, "is a JSON array, not an object"}},
      {"{\"quantization\": ", {f, "not valid JSON"}},
      {hf(R"({"quant_algo": "FP8", "quant_algo": "NVFP4"})"), {f, "duplicate key \"quant_algo\""}},
  };
  size_t rejected = 0;
  for (const auto& [text, fragments] : hf_cases) {
    SCOPED_TRACE(text);
    expect_error([&] { parse_hf_quant_config(text, f); }, fragments);
    ++rejected;
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> config_cases = {
      {R"({"quant_method": "compressed-tensors", "quant_algo": "FP8"})",
       {"config.json", "quant_method \"compressed-tensors\" is not supported"}},
      {R"({"quant_method": "fp8"})", {"quant_method \"fp8\" is not supported"}},
      {R"({"quant_algo": "FP8"})", {"config.json", "has no quant_method"}},
      {R"({"quant_method": "modelopt"})", {"config.json", "names no quant_algo"}},
      {R"({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"})",
       {"quantization_config.quant_algo \"W4A8_AWQ\" is not supported"}},
      {R"({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"type": "int", "num_bits": 8}})",
       {"kv_cache_scheme (object) is not supported"}},
      {R"({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": {"a": 1}})",
       {"quantization_config.ignore is a JSON object"}},
      {R"([1])", {"quantization_config is a JSON array"}},
  };
  for (const auto& [text, fragments] : config_cases) {
    SCOPED_TRACE(text);
    const auto j = nlohmann::json::parse(text);
    expect_error([&] { parse_quantization_config(j, "config.json"); }, fragments);
    ++rejected;
  }
  EXPECT_EQ(rejected, 25u);
}

TEST(QuantConfig, DirectoryPrecedence) {
  ScratchDir dir;
  const std::string cfg = dir.file("config.json"), hf = dir.file("hf_quant_config.json");
  // nothing: unquantized
  EXPECT_EQ(load_quant_config(dir.path().string()).algo, QuantAlgo::None);
  EXPECT_EQ(load_quant_config(dir.path().string()).describe(), "unquantized");
  // config.json without quantization_config, plus hf_quant_config.json: the latter
  write_text(cfg, R"({"model_type": "nemotron_h", "quantization_config": null})");
  write_text(hf, nvfp4_hf_quant_config());
  QuantConfig q = load_quant_config(dir.path().string());
  EXPECT_EQ(q.algo, QuantAlgo::NVFP4);
  EXPECT_EQ(q.source, hf);
  // config.json only marks the method: hf_quant_config.json supplies the rest
  write_text(cfg, R"({"quantization_config": {"quant_method": "modelopt"}})");
  q = load_quant_config(dir.path().string());
  EXPECT_EQ(q.algo, QuantAlgo::NVFP4);
  EXPECT_EQ(q.exclude_modules.size(), 60u);
  // both name the algorithm and agree: config.json wins (vLLM's order)
  write_text(cfg, R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                      "kv_cache_quant_algo": "FP8", "ignore": ["lm_head"]}})");
  q = load_quant_config(dir.path().string());
  EXPECT_EQ(q.source, cfg);
  EXPECT_EQ(q.exclude_modules, std::vector<std::string>{"lm_head"});
  // they disagree: an error naming both files
  write_text(cfg, R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}})");
  expect_error([&] { load_quant_config(dir.path().string()); },
               {cfg, hf, "disagree", "FP8 vs NVFP4"});
  // marker only, no hf_quant_config.json
  std::filesystem::remove(hf);
  write_text(cfg, R"({"quantization_config": {"quant_method": "modelopt"}})");
  expect_error([&] { load_quant_config(dir.path().string()); }, {cfg, "names no quant_algo"});
}

// Python fnmatch.translate's reading of a pattern, as a std::regex: an independent matcher.
// Letters stand for themselves; anything else is escaped (\b would be a backspace in a class).
std::string esc(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string("\\") + c;
}

std::string glob_to_regex(const std::string& pat) {
  std::string re;
  for (size_t i = 0; i < pat.size(); ++i) {
    const char c = pat[i];
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += ".";
    } else if (c == '[') {
      size_t j = i + 1;
      if (j < pat.size() && pat[j] == '!') ++j;
      if (j < pat.size() && pat[j] == ']') ++j;
      while (j < pat.size() && pat[j] != ']')
        ++j;
      if (j >= pat.size()) {
        re += "\\[";
        continue;
      }
      std::string set = pat.substr(i + 1, j - i - 1);
      std::string cls = "[";
      size_t k = 0;
      if (!set.empty() && set[0] == '!') {
        cls += '^';
        k = 1;
      }
      bool any = false;
      for (; k < set.size(); ++k) {
        if (k + 2 < set.size() && set[k + 1] == '-') {
          if (set[k] <= set[k + 2]) cls += esc(set[k]) + "-" + esc(set[k + 2]), any = true;
          k += 2;
        } else {
          cls += esc(set[k]);
          any = true;
        }
      }
      // an empty set matches nothing; a negated empty set matches any character
      re += any ? cls + "]" : (cls == "[^" ? "." : "(?!)");
      i = j;
    } else {
      re += esc(c);
    }
  }
  return re;
}

TEST(ModulePattern, AgreesWithRegexOnRandomPatterns) {
  std::mt19937_64 rng(2024);
  const std::vector<std::string> tokens = {"a",    "b",    ".",     "*",     "?",
                                           "[ab]", "[!a]", "[a-b]", "[b-a]", "[]a]",
                                           "[!]]", "[",    "-",     "]",     "a*b"};
  const std::string name_chars = "ab.]-[";
  int compared = 0, matched = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string pat, name;
    const int np = static_cast<int>(rng() % 6);
    for (int k = 0; k < np; ++k)
      pat += tokens[rng() % tokens.size()];
    const int nn = static_cast<int>(rng() % 8);
    for (int k = 0; k < nn; ++k)
      name += name_chars[rng() % name_chars.size()];
    const bool want = std::regex_match(name, std::regex(glob_to_regex(pat)));
    ASSERT_EQ(glob_match(pat, name), want) << "pattern '" << pat << "' name '" << name << "'";
    ++compared;
    matched += want;
  }
  EXPECT_EQ(compared, 3000);
  EXPECT_GT(matched, 100);  // the sample exercises matches, not only mismatches
}

}  // namespace
}  // namespace strata::io
