#include "engine_flags.h"

#include "core/check.h"
#include "engine/device.h"

namespace strata::cli {

void add_engine_flags(CLI::App* sub, EngineFlags& f) {
  sub->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
  sub->add_option("--max-num-seqs", f.max_num_seqs, "Sequences running at once at most; 0 = the command's default")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{65536}));
  sub->add_option("--max-model-len", f.max_model_len,
                  "Prompt plus generated tokens per request at most; 0 = the model's")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub->add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                  "Tokens per engine step at most (the scheduler's budget)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                  "Fraction of the GPU's memory for weights, workspace and caches")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  sub->add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto (the model's) or fp8 (e4m3)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3"}));
  sub->add_option("--mamba-ssm-cache-dtype", f.mamba_ssm_cache_dtype,
                  "auto (the config's, float32 by default), float32, bfloat16 or float16")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "float32", "bfloat16", "float16"}));
  sub->add_option("--block-size", f.block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  sub->add_flag("--enforce-eager", f.enforce_eager, "Run decode steps without CUDA graphs");
}

engine::EngineConfig engine_config(const EngineFlags& f) {
  engine::EngineConfig c;
  c.executor.device = engine::parse_device(f.device);
  c.executor.max_num_seqs = f.max_num_seqs > 0 ? f.max_num_seqs : 256;
  c.executor.max_model_len = f.max_model_len;
  c.executor.gpu_memory_utilization = f.gpu_memory_utilization;
  c.executor.kv_cache_dtype = f.kv_cache_dtype;
  c.executor.mamba_ssm_cache_dtype = f.mamba_ssm_cache_dtype;
  c.executor.block_size = f.block_size;
  c.executor.cuda_graphs = !f.enforce_eager;
  c.max_num_batched_tokens = f.max_num_batched_tokens;
  return c;
}

}  // namespace strata::cli
