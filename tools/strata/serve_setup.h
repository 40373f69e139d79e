// What `strata serve`, `strata localai` and `strata run-batch` share: vLLM's model, engine and
// chat flags, and building from them the model, tokenizer, chat template, serving context and
// engine.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "model_source_flags.h"
#include "server/openai_protocol.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"

namespace strata::cli {

struct ServingFlags {
  ModelSourceFlags src;
  std::string model_positional;  // `strata serve DIR` as `vllm serve DIR`
  std::string served_model_name, tokenizer, device = "cpu";
  bool skip_tokenizer_init = false;
  int64_t max_model_len = 0, max_num_seqs = 256, max_num_batched_tokens = 8192, block_size = 16;
  int64_t max_num_queued_requests = 0;
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_dtype = "auto", mamba_ssm_cache_dtype = "auto";
  std::string chat_template, default_chat_template_kwargs;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser, reasoning_parser, generation_config = "auto";
  int32_t max_logprobs = 20;
};

void add_serving_flags(CLI::App* sub, ServingFlags& f);

struct Served {
  std::unique_ptr<model::NemotronHModel> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<text::ChatPromptBuilder> chat;
  server::ServingContext ctx;
  std::unique_ptr<engine::LLMEngine> llm;     // moved into `engine` unless the caller wants it
  std::unique_ptr<engine::AsyncEngine> engine;
  std::string cache_info_labels;  // for vllm:cache_config_info
  ~Served();  // engines before the model they run
};

// `loading(what, load)` wraps the slow part (e.g. prints a progress line while load() runs).
// `async`: start an AsyncEngine (serve, localai); else leave `llm` (run-batch).
std::unique_ptr<Served> build_serving(
    const ServingFlags& f, const char* cmd,
    const std::function<void(const std::string&, const std::function<void()>&)>& loading,
    bool async = true);

}  // namespace strata::cli
