// `strata generate`: load a model directory and generate from a prompt (text, encoded with the
// directory's tokenizer.json, or token ids), printing the text as it is generated or one line
// of JSON at the end. Without a tokenizer the output is the generated ids.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.h"
#include "core/check.h"
#include "core/log.h"
#include "engine/device.h"
#include "engine/generator.h"
#include "flag_checks.h"
#include "io/atomic_file.h"
#include "model/nemotron_h/load.h"
#include "model_source_flags.h"
#include "text/chat_template.h"
#include "text/detokenizer.h"
#include "text/generation_config.h"
#include "text/tokenizer.h"

namespace strata::cli {
namespace {

struct GenerateFlags {
  ModelSourceFlags src;  // --model DIR or --load-format dummy
  std::string prompt, prompt_flag, prompt_ids, device = "cpu", output = "text";
  int64_t max_tokens = 16, prefill_chunk = 0;
  float temperature = 0.f, top_p = 1.f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false, stats = false;
  bool chat = false;   // the prompt is one user message rendered by the chat template
  std::string system;  // optional system message for --chat
};

bool has_tokenizer(const std::string& dir) {
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json");
}

// The prompt as ids; a text prompt is encoded with the model's tokenizer (special tokens added
// as HF's encode does).
std::vector<int32_t> prompt_tokens(const GenerateFlags& f, const text::Tokenizer* tok) {
  const int given = !f.prompt.empty() + !f.prompt_flag.empty() + !f.prompt_ids.empty();
  if (given == 0) fail("generate: give a prompt (text, --prompt or --prompt-ids)");
  if (given > 1) fail("generate: give only one of a text prompt, --prompt and --prompt-ids");
  if (!f.prompt_ids.empty()) return engine::parse_token_id_list(f.prompt_ids, "--prompt-ids");
  if (!tok)
    fail("{}: a text prompt needs the model's tokenizer.json; use --prompt-ids", f.src.model);
  const std::string& text = f.prompt.empty() ? f.prompt_flag : f.prompt;
  if (!f.chat) return tok->encode(text, /*add_special_tokens=*/true);
  // A chat prompt: the conversation rendered as transformers' apply_chat_template does, then
  // encoded without special tokens (the template writes them), as vLLM's chat path does.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
  messages.push_back({{"role", "user"}, {"content", text}});
  const auto templates = ModelChatTemplates::load(f.src.model);
  const std::string rendered = templates.render(messages, nullptr, /*add_generation_prompt=*/true,
                                                nlohmann::ordered_json::object());
  return tok->encode(rendered, /*add_special_tokens=*/false);
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

void run_generate(const GenerateFlags& f) {
  if (f.output != "text" && f.output != "json")
    fail("--output must be text or json, got \"{}\"", f.output);
  std::unique_ptr<text::Tokenizer> tok;
  if (has_tokenizer(f.src.model))
    tok = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(f.src.model));
  if (f.chat && !f.prompt_ids.empty())
    fail("generate: --chat takes a text prompt, not --prompt-ids");
  if (!f.chat && !f.system.empty()) fail("generate: --system needs --chat");
  const std::vector<int32_t> prompt = prompt_tokens(f, tok.get());
  const Device device = engine::parse_device(f.device);
  {
    OpContext probe;
    engine::prepare_device(device, probe);  // fail before loading anything
  }
  engine::SamplingParams params;
  params.temperature = f.temperature;
  params.top_k = f.top_k;
  params.top_p = f.top_p;
  params.seed = f.seed;
  params.max_tokens = f.max_tokens;
  params.ignore_eos = f.ignore_eos;
  params.validate();

  auto model = load_from_flags(f.src, device, /*sampling=*/true, "generate");
  // Dummy weights have no directory: their config's EOS ids stop the generation.
  params.stop_token_ids = f.src.model.empty()
                              ? model->config().eos_token_ids
                              : text::stop_token_ids(f.src.model, tok.get(), f.chat);

  engine::GeneratorOptions options;
  options.max_context = static_cast<int64_t>(prompt.size()) + f.max_tokens;
  options.prefill_chunk = f.prefill_chunk;
  engine::Generator gen(*model, device, options);

  // Text output streams as tokens arrive (complete UTF-8 only); special tokens are skipped as
  // vLLM's default detokenization does.
  std::unique_ptr<text::IncrementalDetokenizer> stream;
  if (tok && f.output == "text")
    stream = std::make_unique<text::IncrementalDetokenizer>(*tok, true);
  const engine::GenerationResult r = gen.generate(prompt, params, [&](int32_t id) {
    if (!stream) return;
    io::write_stdout(stream->push(id));
  });

  if (f.output == "json") {
    nlohmann::json j;
    j["token_ids"] = r.tokens;
    if (tok) {
      j["text"] = tok->decode(r.tokens, /*skip_special_tokens=*/true);
    } else {
      j["text"] = nullptr;  // no tokenizer.json in the model directory
    }
    j["finish_reason"] = r.finish_reason;
    j["prompt_tokens"] = r.prompt_tokens;
    std::printf("%s\n", j.dump().c_str());
  } else if (stream) {
    const std::string rest = stream->finish();
    std::printf("%s\n", rest.c_str());
  } else {
    std::printf("%s\n", ids_text(r.tokens).c_str());
  }
  if (f.stats) {
    const model::WeightLoadReport& w = model->weights().report;
    std::fprintf(
        stderr,
        "load: %lld tensors, %.2f MiB mapped, %.2f MiB used in place, %.3f MiB converted, %.3f s\n",
        static_cast<long long>(w.tensors), w.mapped_bytes / 1048576.0, w.viewed_bytes / 1048576.0,
        w.converted_bytes / 1048576.0, w.seconds);
    const double n = static_cast<double>(r.tokens.size());
    std::fprintf(stderr,
                 "prefill %lld tokens in %.3f s; decode %zu tokens in %.3f s (%.1f tokens/s)\n",
                 static_cast<long long>(r.prompt_tokens), r.prefill_seconds, r.tokens.size(),
                 r.decode_seconds, r.decode_seconds > 0 ? (n - 1) / r.decode_seconds : 0.0);
  }
}

void setup_generate(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand("generate", "Generate tokens from a prompt");
  add_model_source_flags(sub, f->src);
  sub->add_option("prompt", f->prompt, "Prompt text");
  sub->add_option("--prompt", f->prompt_flag, "Prompt text");
  sub->add_option("--prompt-ids", f->prompt_ids, "Prompt as comma-separated token ids, e.g. 1,2,3");
  sub->add_option("--max-tokens", f->max_tokens, "Tokens to generate at most")
      ->check(int_range(1, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_option("--temperature", f->temperature, "Sampling temperature; 0 = greedy")
      ->check(float_range(0, 100))
      ->capture_default_str();
  sub->add_option("--top-k", f->top_k, "Keep the k most likely tokens; 0 = off")
      ->check(int_range(0, INT32_MAX))
      ->capture_default_str();
  sub->add_option("--top-p", f->top_p, "Keep the smallest set with this probability mass; 1 = off")
      ->check(float_range(0, 1, /*lo_open=*/true))
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Random seed for sampling")
      ->check(int_range(0, INT64_MAX))
      ->capture_default_str();
  sub->add_flag("--chat", f->chat,
                "Send the prompt as a user message through the model's chat template");
  sub->add_option("--system", f->system, "System message for --chat");
  sub->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at the model's EOS ids");
  sub->add_option("--device", f->device, "cpu or cuda")->capture_default_str();
  sub->add_option("--output", f->output,
                  "text (streamed; the ids when the model has no tokenizer) or json (one line)")
      ->capture_default_str();
  sub->add_option("--prefill-chunk", f->prefill_chunk,
                  "Prefill the prompt in chunks of this many tokens; 0 = all")
      ->check(int_range(0, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_flag("--stats", f->stats, "Print timings to stderr");
  sub->callback([f] { run_generate(*f); });
}

}  // namespace

STRATA_COMMAND(setup_generate);

}  // namespace strata::cli
