// `strata detokenize --model DIR --ids 1,2,3`: prints the decoded text exactly (no newline is
// added, so the output round-trips). Without --ids a JSON array of ids is read from stdin.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/bounded_file.h"
#include "text/tokenizer.h"
#include "text/tokenizer_ids.h"

namespace {

struct DetokenizeOptions {
  std::string model;
  std::string ids;
  bool skip_special_tokens = false;  // HF decode's default
};

void run_detokenize(const DetokenizeOptions& o) {
  const auto tok = strata::text::Tokenizer::from_dir(o.model);
  const std::vector<int32_t> ids =
      o.ids.empty()
          ? strata::text::parse_id_json(
                strata::io::read_stdin_text("the id list", strata::io::kStdinMaxBytes), "stdin")
          : strata::text::parse_id_csv(o.ids, "--ids");
  for (int32_t id : ids) {
    // HF skips unknown ids silently; on the command line that is more likely a mistake.
    if (!tok.token_string(id))
      strata::fail("id {} is not a token of this tokenizer (ids run below {})", id,
                   tok.vocab_size());
  }
  const std::string text = tok.decode(ids, o.skip_special_tokens);
  std::fwrite(text.data(), 1, text.size(), stdout);
  strata::io::check_stdout();
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
