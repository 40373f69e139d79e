// Offline benchmarks of the engine as vLLM's `vllm bench latency` and `vllm bench throughput`
// run them: requests of fixed or random lengths through one LLMEngine (scheduler, executor,
// graphs, sampling, output processing: the serving path without HTTP).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace strata::bench {

// Percentiles of a sample (p in [0, 100], linear interpolation), mean, and count.
struct Stats {
  double mean = 0, median = 0, p10 = 0, p25 = 0, p75 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};
Stats summarize(std::vector<double> v);

struct LatencyOptions {
  int64_t batch_size = 8, input_len = 32, output_len = 128, iters = 10, warmup_iters = 2;
};
struct LatencyResult {
  Stats iteration_s;      // one batch from submission to its last token
  Stats step_ms;          // each decode step (one output token for every sequence)
  Stats prefill_ms;       // the steps until every sequence had its first token
};
LatencyResult run_latency(engine::LLMEngine& engine, int64_t vocab, const LatencyOptions& o);

struct ThroughputOptions {
  int64_t num_prompts = 256, input_len = 1024, output_len = 1024;
  double range_ratio = 0;      // random lengths in [len * (1 - r), len * (1 + r)]
  int64_t max_concurrency = 0;  // requests in flight at most; 0 = all at once
  uint64_t seed = 0;
};
struct ThroughputResult {
  double seconds = 0, requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, completed = 0, preemptions = 0;
  Stats ttft_ms, tpot_ms, e2e_s;
};
ThroughputResult run_throughput(engine::LLMEngine& engine, int64_t vocab,
                                const ThroughputOptions& o);

}  // namespace strata::bench
