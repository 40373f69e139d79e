// `strata bench serve`: a load generator for any OpenAI-compatible server (strata's or vLLM's),
// measuring what `vllm bench serve` measures, the same way (spec/serving.md 2.1): TTFT at the
// first SSE event with non-empty choices, ITL between such events, E2E at the last one,
// output tokens from the final usage chunk (stream_options.include_usage), TPOT per request =
// (E2E - TTFT) / (tokens - 1). The client is asynchronous (Boost.Beast, one I/O thread), so it
// can hold thousands of streams open without a thread each.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::server::bench {

struct BenchConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                          // empty: /v1/models data[0].id
  std::string api_key;
  int64_t num_prompts = 1000;
  int64_t input_len = 1024, output_len = 128;
  double range_ratio = 0;  // lengths drawn uniformly from [len(1-r), len(1+r)]
  int64_t prefix_len = 0;  // a shared prefix of this many tokens
  // Prompts are random token ids in [100, max_token_id): valid for any vocabulary this large
  // (4096: the demo model; Nemotron's is 131072). Sent as token-id lists (completions).
  int32_t max_token_id = 4000;
  double request_rate = std::numeric_limits<double>::infinity();  // req/s, Poisson arrivals
  int64_t max_concurrency = 0;                                    // 0: unbounded
  int64_t num_warmups = 0;
  bool ignore_eos = false;
  uint64_t seed = 0;
  double temperature = 0;
  std::vector<double> percentiles = {99};
  bool progress = true;
};

// One request's measurement.
struct RequestResult {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0, output_tokens = 0;
  double start = 0;            // seconds since the benchmark began
  double ttft = 0, latency = 0;  // seconds
  std::vector<double> itl;     // seconds between chunks with choices
};

struct BenchResult {
  std::string model;  // the model benchmarked (from /v1/models when not given)
  double duration = 0;
  int64_t completed = 0, failed = 0, total_input = 0, total_output = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
  std::vector<RequestResult> requests;
  // "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "std_ttft_ms", ... for ttft, tpot, itl, e2el.
  nlohmann::ordered_json stats;
  std::vector<std::string> errors;  // first few distinct
};

// Runs warm-ups then the benchmark. `progress(done, total)` is called as requests finish.
// Throws strata::Error when the server cannot be reached or the model cannot be found.
BenchResult run_bench(BenchConfig config,
                      const std::function<void(int64_t, int64_t)>& progress = nullptr);

// vLLM's printed block.
std::string format_report(const BenchConfig& config, const BenchResult& r);
// vLLM's --save-result JSON keys.
nlohmann::ordered_json result_json(const BenchConfig& config, const BenchResult& r);

// Metrics from per-request results (exposed for tests).
BenchResult summarize(std::vector<RequestResult> requests, double duration,
                      const std::vector<double>& percentiles);

}  // namespace strata::server::bench
