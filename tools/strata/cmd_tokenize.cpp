// `strata tokenize --model DIR`: text on stdin -> one JSON array of ids on stdout.
// With --jsonl every input line is a JSON string and every output line the ids of that string.
// DIR needs only tokenizer.json (tokenizer_config.json optional).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "command.h"
#include "core/check.h"
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
  if (!o.jsonl) {
    // The whole of stdin, byte for byte (a trailing newline is part of the text, as in HF).
    const std::string text((std::istreambuf_iterator<char>(std::cin)),
                           std::istreambuf_iterator<char>());
    std::printf("%s\n", ids_json(tok.encode(text, o.add_special_tokens)).c_str());
    return;
  }
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      strata::fail("stdin line {}: not valid JSON: {}", n, e.what());
    }
    if (!j.is_string())
      strata::fail("stdin line {}: expected a JSON string, found {}", n, j.type_name());
    std::printf("%s\n", ids_json(tok.encode(j.get<std::string>(), o.add_special_tokens)).c_str());
  }
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
