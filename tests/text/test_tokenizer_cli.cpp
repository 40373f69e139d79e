// `strata tokenize` and `strata detokenize` run as a user would: the real binary, stdin and
// stdout through files, exit codes checked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct CliResult {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs STRATA_BINARY with `args` (already shell-quoted), feeding `stdin_text`.
CliResult run_strata(const std::string& args, const std::string& stdin_text) {
  const fs::path dir = fs::temp_directory_path() / ("strata_tokcli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in", std::ios::binary) << stdin_text;
  const std::string cmd = std::string("'") + STRATA_BINARY + "' " + args + " <'" +
                          (dir / "in").string() + "' >'" + (dir / "out").string() + "' 2>'" +
                          (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

const std::string kDir = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/tokenizers_handmade/";

TEST(TokenizerCli, TokenizePrintsOneJsonArray) {
  // gpt2_mini: "hello world" -> 259 264 (see test_tokenizer_handmade.cpp).
  CliResult r = run_strata("tokenize --model '" + kDir + "gpt2_mini'", "hello world");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "[259,264]\n");
  // nemotron_mini adds <s>=1 by default (HF encode's add_special_tokens=True) ...
  r = run_strata("tokenize --model '" + kDir + "nemotron_mini'", "the cat");
  EXPECT_EQ(r.out, "[1,271,46,113,111,130]\n");
  // ... and not with --no-add-special-tokens.
  r = run_strata("tokenize --no-add-special-tokens --model '" + kDir + "nemotron_mini'", "the cat");
  EXPECT_EQ(r.out, "[271,46,113,111,130]\n");
  // stdin that is not text is refused with the offset (issue 12: it used to become U+FFFD).
  r = run_strata("tokenize --model '" + kDir + "gpt2_mini'", "ok\xFF");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("not valid UTF-8 (byte 2 of 3)"), std::string::npos) << r.err;
}

TEST(TokenizerCli, TokenizeJsonl) {
  CliResult r = run_strata("tokenize --jsonl --model '" + kDir + "nemotron_mini'",
                           "\"the cat\"\n\"\"\n\" the\"\n");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "[1,271,46,113,111,130]\n[1]\n[1,272]\n");
  r = run_strata("tokenize --jsonl --model '" + kDir + "nemotron_mini'", "\"ok\"\nnot json\n");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("stdin line 2: not valid JSON"), std::string::npos) << r.err;
}

TEST(TokenizerCli, DetokenizeRoundTrips) {
  CliResult r =
      run_strata("detokenize --model '" + kDir + "nemotron_mini' --ids 1,271,46,113,111,130", "");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "<s>the cat");  // exactly the text: no newline added
  r = run_strata("detokenize --skip-special-tokens --model '" + kDir +
                     "nemotron_mini' --ids 1,271,46,113,111,130",
                 "");
  EXPECT_EQ(r.out, "the cat");
  // Ids from stdin as a JSON array.
  r = run_strata("detokenize --model '" + kDir + "gpt2_mini'", "[259, 264]");
  EXPECT_EQ(r.out, "hello world");
}

TEST(TokenizerCli, BadInputFailsWithOneLine) {
  auto one_line_error = [](const CliResult& r) {
    return r.rc != 0 && !r.err.empty() && r.err.find('\n') == r.err.size() - 1;
  };
  CliResult r = run_strata("tokenize --model /nonexistent-strata-model", "x");
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("no tokenizer.json"), std::string::npos);
  r = run_strata("detokenize --model '" + kDir + "gpt2_mini' --ids 1,x", "");
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("--ids: \"x\""), std::string::npos);
  r = run_strata("detokenize --model '" + kDir + "gpt2_mini' --ids 5000", "");
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("id 5000 is not a token"), std::string::npos);
  r = run_strata("tokenize", "x");  // --model is required
  EXPECT_NE(r.rc, 0);
}

}  // namespace
