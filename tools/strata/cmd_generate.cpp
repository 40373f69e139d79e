// `strata generate`: load a model directory and generate from a prompt (text, encoded with the
// directory's tokenizer.json, or token ids), printing the text as it is generated or one line
// of JSON at the end. Without a tokenizer the output is the generated ids.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.h"
#include "core/check.h"
#include "core/log.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/token_ids.h"
#include "engine/sampling_json.h"
#include "engine_flags.h"
#include "io/json_strict.h"
#include "flag_checks.h"
#include "io/atomic_file.h"
#include "model/nemotron_h/load.h"
#include "model_source_flags.h"
#include "text/chat_request.h"
#include "text/detokenizer.h"
#include "text/generation_config.h"
#include "text/tokenizer.h"

namespace strata::cli {
namespace {

struct GenerateFlags {
  ModelSourceFlags src;  // --model DIR or --load-format dummy
  EngineFlags engine;    // --device, --max-num-seqs, ... (vLLM's names)
  std::string prompt, prompt_flag, prompt_ids, prompts_file, output = "text";
  int64_t max_tokens = 16, prefill_chunk = 0;
  float temperature = 0.f, top_p = 1.f, min_p = 0.f;
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
  const auto builder = text::ChatPromptBuilder::from_model_dir(f.src.model);
  return text::chat_prompt_ids(builder, *tok, text::single_turn_chat(text, f.system));
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// One request's sampling parameters from the flags.
engine::SamplingParams flag_params(const GenerateFlags& f) {
  engine::SamplingParams p;
  p.temperature = f.temperature;
  p.top_k = f.top_k;
  p.top_p = f.top_p;
  p.min_p = f.min_p;
  p.seed = f.seed;
  p.max_tokens = f.max_tokens;
  p.ignore_eos = f.ignore_eos;
  return p;
}

// --prompts-file: one JSON object per line, `prompt` (text) or `prompt_ids`, and optional
// sampling fields with vLLM's names.
std::vector<engine::EngineRequest> read_prompts_file(const GenerateFlags& f,
                                                     const text::Tokenizer* tok) {
  std::vector<std::string> lines;
  {
    const std::string text = io::read_text_file(f.prompts_file);
    size_t start = 0;
    while (start <= text.size()) {
      const size_t nl = std::min(text.find('\n', start), text.size());
      lines.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
  }
  std::vector<engine::EngineRequest> reqs;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", f.prompts_file, i + 1);
    const nlohmann::json j = io::parse_json_strict(lines[i], where, /*max_depth=*/16);
    if (!j.is_object()) fail("{}: expected a JSON object", where);
    engine::EngineRequest r;
    r.id = fmt::format("{}", reqs.size());
    r.params = engine::sampling_params_from_json(j, flag_params(f), where);
    const bool has_text = j.contains("prompt"), has_ids = j.contains("prompt_ids");
    if (has_text == has_ids) fail("{}: give exactly one of \"prompt\" and \"prompt_ids\"", where);
    if (has_ids) {
      r.prompt = engine::token_ids_from_json(j["prompt_ids"], where + ": prompt_ids");
    } else {
      if (!j["prompt"].is_string()) fail("{}: \"prompt\" must be a string", where);
      if (!tok) fail("{}: a text prompt needs the model's tokenizer.json; use prompt_ids", where);
      r.prompt = tok->encode(j["prompt"].get<std::string>(), /*add_special_tokens=*/true);
    }
    reqs.push_back(std::move(r));
  }
  if (reqs.empty()) fail("{}: no prompts", f.prompts_file);
  return reqs;
}

void print_checked(const std::string& s) { io::write_stdout(s); }

void run_generate(GenerateFlags& f) {
  if (f.output != "text" && f.output != "json")
    fail("--output must be text or json, got \"{}\"", f.output);
  std::unique_ptr<text::Tokenizer> tok;
  if (has_tokenizer(f.src.model))
    tok = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(f.src.model));
  if (f.chat && !f.prompt_ids.empty())
    fail("generate: --chat takes a text prompt, not --prompt-ids");
  if (!f.chat && !f.system.empty()) fail("generate: --system needs --chat");
  const bool many = !f.prompts_file.empty();
  if (many && (!f.prompt.empty() || !f.prompt_flag.empty() || !f.prompt_ids.empty() || f.chat))
    fail("generate: --prompts-file takes the prompts from the file; give no other prompt");

  std::vector<engine::EngineRequest> reqs;
  if (many) {
    reqs = read_prompts_file(f, tok.get());
  } else {
    engine::EngineRequest r;
    r.id = "0";
    r.prompt = prompt_tokens(f, tok.get());
    r.params = flag_params(f);
    reqs.push_back(std::move(r));
  }
  // One prompt: caches just for it (the decode graph's block table matches `strata bench`).
  if (f.engine.max_num_seqs == 0) f.engine.max_num_seqs = many ? 256 : 1;
  if (f.engine.max_model_len == 0 && !many)
    f.engine.max_model_len = static_cast<int64_t>(reqs[0].prompt.size()) + f.max_tokens;
  if (f.prefill_chunk > 0) f.engine.max_num_batched_tokens = f.prefill_chunk;
  engine::EngineConfig ec = engine_config(f.engine);
  {
    OpContext probe;
    engine::prepare_device(ec.executor.device, probe);  // fail before loading anything
  }
  for (const auto& r : reqs) r.params.validate();

  auto model = load_from_flags(f.src, ec.executor.device, /*sampling=*/true, "generate");
  // Dummy weights have no directory: their config's EOS ids stop the generation.
  ec.eos_ids = f.src.model.empty() ? model->config().eos_token_ids
                                   : text::stop_token_ids(f.src.model, tok.get(), f.chat);
  const auto t_load = std::chrono::steady_clock::now();
  engine::LLMEngine eng(*model, tok.get(), ec);
  log::info("{}", eng.executor().describe_pools());
  for (auto& r : reqs)
    if (!eng.add_request(r)) fail("generate: the engine's waiting queue is full");

  struct Result {
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::string> text, finish;
    std::string error;
  };
  std::vector<Result> results(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const size_t n = static_cast<size_t>(reqs[i].params.n);
    results[i].ids.resize(n);
    results[i].text.resize(n);
    results[i].finish.resize(n);
  }
  const bool stream = !many && f.output == "text" && tok && reqs[0].params.n == 1;
  int64_t generated = 0;
  double first_token_s = -1;
  while (eng.has_unfinished()) {
    for (engine::RequestOutput& o : eng.step()) {
      Result& r = results[std::stoul(o.request_id)];
      if (!o.error.empty()) r.error = o.error;
      for (engine::CompletionDelta& d : o.completions) {
        const auto k = static_cast<size_t>(d.index);
        r.ids[k].insert(r.ids[k].end(), d.token_ids.begin(), d.token_ids.end());
        r.text[k] += d.text;
        generated += static_cast<int64_t>(d.token_ids.size());
        if (d.finish != engine::FinishReason::None) r.finish[k] = engine::finish_reason_name(d.finish);
        if (stream) print_checked(d.text);
      }
      if (first_token_s < 0 && generated > 0)
        first_token_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    }
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (!r.error.empty()) fail("generate: prompt {}: {}", i, r.error);
    if (f.output == "json") {
      nlohmann::json j;
      j["token_ids"] = r.ids[0];
      j["text"] = tok ? nlohmann::json(r.text[0]) : nlohmann::json(nullptr);
      j["finish_reason"] = r.finish[0];
      j["prompt_tokens"] = reqs[i].prompt.size();
      if (r.ids.size() > 1)
        for (size_t k = 0; k < r.ids.size(); ++k)
          j["completions"].push_back({{"token_ids", r.ids[k]},
                                      {"text", tok ? nlohmann::json(r.text[k]) : nlohmann::json(nullptr)},
                                      {"finish_reason", r.finish[k]}});
      print_checked(j.dump() + "\n");
    } else if (stream) {
      print_checked("\n");
    } else {
      for (size_t k = 0; k < r.ids.size(); ++k)
        print_checked((tok ? r.text[k] : ids_text(r.ids[k])) + "\n");
    }
  }
  if (f.stats) {
    const model::WeightLoadReport& w = model->weights().report;
    std::fprintf(
        stderr,
        "load: %lld tensors, %.2f MiB mapped, %.2f MiB used in place, %.3f MiB converted, %.3f s\n",
        static_cast<long long>(w.tensors), w.mapped_bytes / 1048576.0, w.viewed_bytes / 1048576.0,
        w.converted_bytes / 1048576.0, w.seconds);
    const double decode_s = total_s - first_token_s;
    const double per_seq = static_cast<double>(generated) / static_cast<double>(reqs.size());
    std::fprintf(stderr,
                 "%zu prompt(s): first token after %.3f s; %lld tokens in %.3f s; decode %.1f "
                 "tokens/s per sequence after the first token\n",
                 reqs.size(), first_token_s, static_cast<long long>(generated), total_s,
                 decode_s > 0 ? (per_seq - 1) / decode_s : 0.0);
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
  f->engine.device = "cpu";
  f->engine.max_num_seqs = 0;  // 0: 1 for one prompt, 256 for --prompts-file
  add_engine_flags(sub, f->engine);
  sub->add_option("--prompts-file", f->prompts_file,
                  "Run many prompts together: one JSON object per line (prompt or prompt_ids, "
                  "and sampling fields with vLLM's names)");
  sub->add_option("--min-p", f->min_p, "Drop tokens below min_p x the top probability; 0 = off")
      ->capture_default_str();
  sub->add_option("--output", f->output,
                  "text (streamed; the ids when the model has no tokenizer) or json (one line)")
      ->capture_default_str();
  sub->add_option("--prefill-chunk", f->prefill_chunk,
                  "Prefill in chunks of this many tokens (sets --max-num-batched-tokens); 0 = all")
      ->check(int_range(0, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_flag("--stats", f->stats, "Print timings to stderr");
  sub->callback([f] { run_generate(*f); });
}

}  // namespace

STRATA_COMMAND(setup_generate);

}  // namespace strata::cli
