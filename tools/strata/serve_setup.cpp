#include "serve_setup.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "engine/device.h"
#include "text/generation_config.h"

namespace strata::cli {

namespace fs = std::filesystem;

Served::~Served() {
  engine.reset();
  llm.reset();
}

void add_serving_flags(CLI::App* sub, ServingFlags& f) {
  add_model_source_flags(sub, f.src);
  sub->add_option("model_dir", f.model_positional, "Model directory (same as --model)");
  sub->add_option("--served-model-name", f.served_model_name,
                  "The model name the API lists and accepts (default: the --model path)");
  sub->add_option("--tokenizer", f.tokenizer,
                  "Directory of tokenizer.json (default: the model directory; dummy weights have none)");
  sub->add_flag("--skip-tokenizer-init", f.skip_tokenizer_init,
                "Serve without a tokenizer: prompts are token-id lists, outputs carry token ids");
  sub->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
  sub->add_option("--max-model-len", f.max_model_len,
                  "Context length (default: the model's max_position_embeddings)");
  sub->add_option("--max-num-seqs", f.max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  sub->add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "Most tokens per step")
      ->capture_default_str();
  sub->add_option("--block-size", f.block_size, "KV-cache tokens per block")->capture_default_str();
  sub->add_option("--max-num-queued-requests", f.max_num_queued_requests,
                  "Waiting requests beyond which new ones get 503 (default 0: unbounded)");
  sub->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                  "Fraction of device memory for weights, caches and workspace")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  sub->add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto or fp8")->capture_default_str();
  sub->add_option("--mamba-ssm-cache-dtype", f.mamba_ssm_cache_dtype,
                  "auto, float32 or bfloat16")
      ->capture_default_str();
  sub->add_option("--chat-template", f.chat_template, "A Jinja chat template file to use instead");
  sub->add_option("--default-chat-template-kwargs", f.default_chat_template_kwargs,
                  "JSON object of chat-template kwargs every request starts from");
  sub->add_flag("--enable-auto-tool-choice", f.enable_auto_tool_choice,
                "Parse tool calls out of the output (needs --tool-call-parser)");
  sub->add_option("--tool-call-parser", f.tool_call_parser, "Tool-call format of the model");
  sub->add_option("--reasoning-parser", f.reasoning_parser, "Reasoning format of the model");
  sub->add_option("--generation-config", f.generation_config,
                  "auto (the model's generation_config.json), vllm (none) or a directory")
      ->capture_default_str();
  sub->add_option("--max-logprobs", f.max_logprobs, "Largest logprobs / top_logprobs accepted")
      ->capture_default_str();
}

std::unique_ptr<Served> build_serving(
    const ServingFlags& flags, const char* cmd,
    const std::function<void(const std::string&, const std::function<void()>&)>& loading,
    bool async) {
  ServingFlags f = flags;
  if (!f.model_positional.empty()) {
    if (!f.src.model.empty() && f.src.model != f.model_positional)
      fail("{}: the model is given twice ({} and --model {})", cmd, f.model_positional, f.src.model);
    f.src.model = f.model_positional;
  }
  if (f.enable_auto_tool_choice && f.tool_call_parser.empty())
    fail("{}: --enable-auto-tool-choice needs --tool-call-parser", cmd);
  nlohmann::ordered_json default_kwargs = nullptr;
  if (!f.default_chat_template_kwargs.empty()) {
    try {
      default_kwargs = nlohmann::ordered_json::parse(f.default_chat_template_kwargs);
    } catch (const std::exception& e) {
      fail("{}: --default-chat-template-kwargs is not JSON: {}", cmd, e.what());
    }
    if (!default_kwargs.is_object())
      fail("{}: --default-chat-template-kwargs must be a JSON object", cmd);
  }
  const Device device = engine::parse_device(f.device);
  {
    OpContext probe;
    engine::prepare_device(device, probe);  // fail before loading anything
  }

  auto s = std::make_unique<Served>();
  const std::string tokenizer_dir = !f.tokenizer.empty() ? f.tokenizer : f.src.model;
  if (!f.skip_tokenizer_init && !tokenizer_dir.empty() &&
      fs::exists(fs::path(tokenizer_dir) / "tokenizer.json"))
    s->tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(tokenizer_dir));
  else if (!f.skip_tokenizer_init && !f.tokenizer.empty())
    fail("{}: --tokenizer {}: no tokenizer.json there", cmd, f.tokenizer);
  if (s->tokenizer && !f.src.model.empty()) {
    try {
      s->chat = std::make_unique<text::ChatPromptBuilder>(text::ChatPromptBuilder::from_model_dir(
          f.src.model, f.chat_template, default_kwargs));
    } catch (const Error& e) {
      if (!f.chat_template.empty()) throw;
      log::warn("{}: no chat template ({}); /v1/chat/completions will answer 400", cmd, e.what());
    }
  }

  const std::string what = f.src.model.empty() ? "dummy weights (" + f.src.preset + f.src.config + ")"
                                               : f.src.model;
  loading(what, [&] { s->model = load_from_flags(f.src, device, /*sampling=*/true, cmd); });

  engine::EngineConfig config;
  config.executor.device = device;
  config.executor.max_num_seqs = f.max_num_seqs;
  config.executor.max_model_len = f.max_model_len;
  config.executor.block_size = f.block_size;
  config.executor.gpu_memory_utilization = f.gpu_memory_utilization;
  config.executor.kv_cache_dtype = f.kv_cache_dtype;
  config.executor.mamba_ssm_cache_dtype = f.mamba_ssm_cache_dtype;
  config.executor.max_num_batched_tokens = f.max_num_batched_tokens;
  config.max_num_batched_tokens = f.max_num_batched_tokens;
  config.max_waiting = f.max_num_queued_requests;
  config.eos_ids = f.src.model.empty()
                       ? s->model->config().eos_token_ids
                       : text::stop_token_ids(f.src.model, s->tokenizer.get(), /*chat=*/false);
  s->llm = std::make_unique<engine::LLMEngine>(*s->model, s->tokenizer.get(), config);
  log::info("{}", s->llm->executor().describe_pools());

  auto& ctx = s->ctx;
  ctx.served_model_name = !f.served_model_name.empty() ? f.served_model_name
                          : !f.src.model.empty()       ? f.src.model
                                                       : f.src.preset;
  if (!f.src.model.empty() && f.src.model != ctx.served_model_name)
    ctx.model_aliases.push_back(f.src.model);
  ctx.model_root = !f.src.model.empty() ? f.src.model : f.src.preset;
  ctx.max_model_len = s->llm->executor().max_model_len();
  ctx.vocab_size = static_cast<int32_t>(s->model->config().vocab_size);
  ctx.max_logprobs = f.max_logprobs;
  ctx.tokenizer = s->tokenizer.get();
  ctx.chat = s->chat.get();
  if (f.generation_config == "auto" && !f.src.model.empty())
    ctx.generation_defaults = text::GenerationConfig::from_dir(f.src.model);
  else if (f.generation_config != "auto" && f.generation_config != "vllm")
    ctx.generation_defaults = text::GenerationConfig::from_dir(f.generation_config);
  ctx.enable_auto_tool_choice = f.enable_auto_tool_choice;
  ctx.tool_call_parser = f.tool_call_parser;
  ctx.reasoning_parser = f.reasoning_parser;
  s->cache_info_labels =
      fmt::format("block_size=\"{}\",cache_dtype=\"{}\",mamba_ssm_cache_dtype=\"{}\","
                  "gpu_memory_utilization=\"{}\"",
                  f.block_size, f.kv_cache_dtype, f.mamba_ssm_cache_dtype, f.gpu_memory_utilization);
  if (async) s->engine = std::make_unique<engine::AsyncEngine>(std::move(s->llm));
  return s;
}

}  // namespace strata::cli
