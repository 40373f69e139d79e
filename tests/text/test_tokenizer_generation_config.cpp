// generation_config.json parsing and the stop-id set for a model directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/check.h"
#include "text/generation_config.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              ("strata_gencfg_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& file, const std::string& text) const {
    std::ofstream(path_ / file) << text;
  }

 private:
  fs::path path_;
};

const std::string kHandmade =
    std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/tokenizers_handmade/";

TEST(GenerationConfig, ReadsIdsAndSamplingDefaults) {
  TempDir d("read");
  d.write("generation_config.json",
          R"({"bos_token_id": 1, "eos_token_id": [2, 11], "pad_token_id": 0, "do_sample": true,
              "temperature": 0.6, "top_p": 0.95, "top_k": 20, "transformers_version": "5.17.0"})");
  const GenerationConfig g = GenerationConfig::from_dir(d.path());
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{2, 11}));
  EXPECT_EQ(g.pad_token_id, 0);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_FLOAT_EQ(g.temperature.value(), 0.6f);
  EXPECT_FLOAT_EQ(g.top_p.value(), 0.95f);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_FALSE(g.max_new_tokens.has_value());

  d.write("generation_config.json", R"({"eos_token_id": 2})");
  EXPECT_EQ(GenerationConfig::from_dir(d.path()).eos_token_ids, (std::vector<int32_t>{2}));
}

TEST(GenerationConfig, MissingFileIsEmptyAndBadFilesNameTheField) {
  TempDir d("bad");
  EXPECT_TRUE(GenerationConfig::from_dir(d.path()).eos_token_ids.empty());
  auto message = [&](const std::string& text) {
    d.write("generation_config.json", text);
    try {
      GenerationConfig::from_dir(d.path());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"eos_token_id": "2"})").find("generation_config.json: eos_token_id"),
            std::string::npos);
  EXPECT_NE(message(R"({"eos_token_id": [2, -1]})").find("eos_token_id[1]"), std::string::npos);
  EXPECT_NE(message(R"({"top_p": 1.5})").find("top_p"), std::string::npos);
  EXPECT_NE(message("{").find("not valid JSON"), std::string::npos);
}

TEST(GenerationConfig, StopIdsUnionConfigsAndChatEnd) {
  // nemotron_mini's tokenizer: eos "</s>" = 2, "<|im_end|>" = 11.
  const Tokenizer tok = Tokenizer::from_dir(kHandmade + "nemotron_mini");
  TempDir d("stop");
  d.write("generation_config.json", R"({"eos_token_id": [2, 7]})");
  d.write("config.json", R"({"eos_token_id": 5, "hidden_size": 8})");
  // generation_config {2, 7} + config.json {5} + tokenizer eos {2}.
  EXPECT_EQ(stop_token_ids(d.path(), &tok, false), (std::vector<int32_t>{2, 5, 7}));
  // A chat adds <|im_end|> = 11.
  EXPECT_EQ(stop_token_ids(d.path(), &tok, true), (std::vector<int32_t>{2, 5, 7, 11}));
  // Without a tokenizer only the configs count.
  EXPECT_EQ(stop_token_ids(d.path(), nullptr, true), (std::vector<int32_t>{2, 5, 7}));
  // gpt2_mini has no <|im_end|>: chat adds nothing; its eos is <|endoftext|> = 268.
  const Tokenizer gpt2 = Tokenizer::from_dir(kHandmade + "gpt2_mini");
  TempDir e("stop_empty");
  EXPECT_EQ(stop_token_ids(e.path(), &gpt2, true), (std::vector<int32_t>{268}));
}

}  // namespace
}  // namespace strata::text
