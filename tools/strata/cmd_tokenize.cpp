// `strata tokenize --model DIR`: text on stdin -> one JSON array of ids on stdout.
// With --jsonl every input line is a JSON string and every output line the ids of that string.
// DIR needs only tokenizer.json (tokenizer_config.json optional).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "text/tokenizer.h"

namespace {

struct TokenizeOptions {
  std::string model;
  bool add_special_tokens = true;  // HF encode's default
  bool jsonl = false;
};

std::string ids_json(const std::vector<int32_t>& ids) {
  return nlohmann::json(ids).dump();
}

void run_tokenize(const TokenizeOptions& o) {
  const auto tok = strata::text::Tokenizer::from_dir(o.model);
  const std::string input = strata::io::read_stdin_text("the text", strata::io::kStdinMaxBytes);
  if (!o.jsonl) {
    // The whole of stdin, byte for byte (a trailing newline is part of the text, as in HF).
    std::printf("%s\n", ids_json(tok.encode(input, o.add_special_tokens)).c_str());
    strata::io::check_stdout();
    return;
  }
  size_t pos = 0;
  for (size_t n = 1; pos < input.size(); ++n) {
    const size_t eol = std::min(input.find('\n', pos), input.size());
    const std::string_view line = std::string_view(input).substr(pos, eol - pos);
    pos = eol + 1;
    const nlohmann::json j = strata::io::parse_json_strict(line, fmt::format("stdin line {}", n),
                                                           strata::io::kRequestJsonMaxDepth);
    if (!j.is_string())
      strata::fail("stdin line {}: expected a JSON string, found {}", n, j.type_name());
    std::printf("%s\n", ids_json(tok.encode(j.get<std::string>(), o.add_special_tokens)).c_str());
  }
  strata::io::check_stdout();
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of the text on stdin (JSON)");
  cmd->add_option("--model", opts->model, "Model or tokenizer directory (holds tokenizer.json)")
      ->required();
  cmd->add_flag("--add-special-tokens,!--no-add-special-tokens", opts->add_special_tokens,
                "Apply the post-processor's special tokens, e.g. BOS (default: on, as HF encode)");
  cmd->add_flag("--jsonl", opts->jsonl,
                "Read one JSON string per line; print one JSON array per line");
  cmd->callback([opts] { run_tokenize(*opts); });
}

}  // namespace

STRATA_COMMAND(setup);
