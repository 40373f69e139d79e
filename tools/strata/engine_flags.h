// The engine's flags with vLLM's names, shared by every command that runs the engine
// (generate, bench latency / throughput, serve, run-batch): --max-num-seqs, --max-model-len,
// --max-num-batched-tokens, --gpu-memory-utilization, --kv-cache-dtype,
// --mamba-ssm-cache-dtype, --block-size, --enforce-eager, --device.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "engine/engine.h"

namespace strata::cli {

struct EngineFlags {
  std::string device = "cuda";
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 0;  // 0: the model's
  int64_t max_num_batched_tokens = 8192;
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_dtype = "auto", mamba_ssm_cache_dtype = "auto";
  int64_t block_size = 16;
  bool enforce_eager = false;  // no CUDA graphs
};

// Adds the flags; `device_default` is the --device default of the command.
void add_engine_flags(CLI::App* sub, EngineFlags& f);
// The engine configuration the flags describe (ranges checked, naming the flag).
engine::EngineConfig engine_config(const EngineFlags& f);

}  // namespace strata::cli
