// `strata detokenize --model DIR --ids 1,2,3`: prints the decoded text exactly (no newline is
// added, so the output round-trips). Without --ids a JSON array of ids is read from stdin.
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "command.h"
#include "core/check.h"
#include "text/tokenizer.h"

namespace {

struct DetokenizeOptions {
  std::string model;
  std::string ids;
  bool skip_special_tokens = false;  // HF decode's default
};

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    int32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
      strata::fail("--ids: \"{}\" is not a non-negative token id (expected e.g. --ids 1,2,3)",
                   item);
    ids.push_back(v);
    pos = comma + 1;
  }
  return ids;
}

std::vector<int32_t> read_ids_from_stdin() {
  const std::string text((std::istreambuf_iterator<char>(std::cin)),
                         std::istreambuf_iterator<char>());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    strata::fail("stdin: expected a JSON array of ids: {}", e.what());
  }
  if (!j.is_array()) strata::fail("stdin: expected a JSON array of ids, found {}", j.type_name());
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX)
      strata::fail("stdin: element {} is not a token id: {}", i, j[i].dump());
    ids.push_back(static_cast<int32_t>(j[i].get<int64_t>()));
  }
  return ids;
}

void run_detokenize(const DetokenizeOptions& o) {
  const auto tok = strata::text::Tokenizer::from_dir(o.model);
  const std::vector<int32_t> ids = o.ids.empty() ? read_ids_from_stdin() : parse_id_list(o.ids);
  for (int32_t id : ids) {
    // HF skips unknown ids silently; on the command line that is more likely a mistake.
    if (!tok.token_string(id))
      strata::fail("id {} is not a token of this tokenizer (ids run below {})", id,
                   tok.vocab_size());
  }
  const std::string text = tok.decode(ids, o.skip_special_tokens);
  std::fwrite(text.data(), 1, text.size(), stdout);
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<DetokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Print the text of a list of token ids");
  cmd->add_option("--model", opts->model, "Model or tokenizer directory (holds tokenizer.json)")
      ->required();
  cmd->add_option("--ids", opts->ids, "Comma-separated ids (default: a JSON array on stdin)");
  cmd->add_flag("--skip-special-tokens", opts->skip_special_tokens,
                "Leave out special tokens such as <s>");
  cmd->callback([opts] { run_detokenize(*opts); });
}

}  // namespace

STRATA_COMMAND(setup);
