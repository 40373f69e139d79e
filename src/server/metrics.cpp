#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// vLLM's bucket edges (vllm/v1/metrics/loggers.py), kept so Grafana boards keep working.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
// 1, 2, 5, 10, 20, 50, ... up to `max` (vLLM's build_1_2_5_buckets).
std::vector<double> buckets_125(int64_t max) {
  std::vector<double> b;
  for (double m = 1; m <= static_cast<double>(std::max<int64_t>(max, 1)); m *= 10)
    for (double f : {1.0, 2.0, 5.0})
      if (m * f <= static_cast<double>(std::max<int64_t>(max, 1))) b.push_back(m * f);
  return b;
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string prometheus_escape(const std::string& v) {
  std::string r;
  for (char c : v) {
    if (c == '\\') r += "\\\\";
    else if (c == '"') r += "\\\"";
    else if (c == '\n') r += "\\n";
    else r += c;
  }
  return r;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (!std::isfinite(v)) return;
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, number(sum_));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

ServerMetrics::ServerMetrics(std::string model_name, int64_t max_model_len,
                             std::string cache_info_labels)
    : labels_(fmt::format("model_name=\"{}\",engine=\"0\"", prometheus_escape(model_name))),
      cache_info_labels_(std::move(cache_info_labels)),
      ttft_(ttft_buckets()),
      itl_(itl_buckets()),
      tpot_req_(itl_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()),
      prefill_(latency_buckets()),
      decode_(latency_buckets()),
      inference_(latency_buckets()),
      prompt_tokens_(buckets_125(max_model_len)),
      generation_tokens_(buckets_125(max_model_len)),
      params_n_({1, 2, 5, 10, 20}),
      params_max_tokens_(buckets_125(max_model_len)) {}

void ServerMetrics::on_output(RequestTimer& t, const engine::RequestOutput& out,
                              Clock::time_point now) {
  int64_t tokens = 0;
  for (const auto& c : out.completions) tokens += static_cast<int64_t>(c.token_ids.size());
  if (tokens == 0) return;
  std::lock_guard lock(mu_);
  if (!t.first_token_seen) {
    t.first_token_seen = true;
    t.first_token = now;
    ttft_.observe(seconds(now - t.arrival));
  } else {
    itl_.observe(seconds(now - t.last_token));
  }
  t.last_token = now;
  t.generated += tokens;
}

void ServerMetrics::on_finished(RequestTimer& t, const engine::RequestOutput& last,
                                const char* finish_reason, int32_t n, int64_t max_tokens,
                                Clock::time_point now) {
  std::lock_guard lock(mu_);
  double e2e = seconds(now - t.arrival);
  double queue = std::max(0.0, last.queue_seconds);
  e2e_.observe(e2e);
  queue_.observe(queue);
  inference_.observe(std::max(0.0, e2e - queue));
  if (t.first_token_seen) {
    double first = seconds(t.first_token - t.arrival);
    prefill_.observe(std::max(0.0, first - queue));
    decode_.observe(std::max(0.0, e2e - first));
    if (t.generated > 1) tpot_req_.observe(std::max(0.0, e2e - first) / (t.generated - 1));
  }
  prompt_tokens_.observe(static_cast<double>(last.prompt_tokens));
  generation_tokens_.observe(static_cast<double>(t.generated));
  params_n_.observe(n);
  params_max_tokens_.observe(static_cast<double>(max_tokens));
  success_[finish_reason ? finish_reason : "abort"]++;
}

std::string ServerMetrics::render(const engine::EngineStats& s, const ServerGauges& g) const {
  std::string out;
  out.reserve(16 * 1024);
  const std::string& l = labels_;
  header(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  out += fmt::format("vllm:num_requests_running{{{}}} {}\n", l, s.running);
  header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  out += fmt::format("vllm:num_requests_waiting{{{}}} {}\n", l, s.waiting);
  header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  out += fmt::format("vllm:kv_cache_usage_perc{{{}}} {}\n", l, number(s.kv_usage));
  header(out, "strata:mamba_state_usage_perc", "gauge",
         "Mamba state-slot usage. 1 means 100 percent usage.");
  out += fmt::format("strata:mamba_state_usage_perc{{{}}} {}\n", l, number(s.mamba_usage));
  header(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
  out += fmt::format("vllm:cache_config_info{{{}{}{}}} 1\n", l,
                     cache_info_labels_.empty() ? "" : ",", cache_info_labels_);

  header(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  out += fmt::format("vllm:prompt_tokens_total{{{}}} {}\n", l, s.prompt_tokens);
  header(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  out += fmt::format("vllm:generation_tokens_total{{{}}} {}\n", l, s.generation_tokens);
  header(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.");
  out += fmt::format("vllm:num_preemptions_total{{{}}} {}\n", l, s.preemptions);
  header(out, "strata:engine_steps_total", "counter", "Engine steps run.");
  out += fmt::format("strata:engine_steps_total{{{}}} {}\n", l, s.steps);

  header(out, "strata:http_open_connections", "gauge", "Open HTTP connections.");
  out += fmt::format("strata:http_open_connections{{{}}} {}\n", l, g.open_connections);
  header(out, "strata:server_requests_in_flight", "gauge",
         "Engine requests the server is waiting on (submitted, not finished).");
  out += fmt::format("strata:server_requests_in_flight{{{}}} {}\n", l, g.requests_in_flight);

  std::lock_guard lock(mu_);
  header(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    auto it = success_.find(reason);
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", l, reason,
                       it == success_.end() ? 0 : it->second);
  }
  struct H {
    const char* name;
    const char* help;
    const Histogram& h;
  };
  const H hs[] = {
      {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_},
      {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_},
      {"vllm:time_per_output_token_seconds",
       "Histogram of time per output token in seconds (deprecated: inter_token_latency).", itl_},
      {"vllm:request_time_per_output_token_seconds",
       "Histogram of time_per_output_token_seconds per request.", tpot_req_},
      {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_},
      {"vllm:request_queue_time_seconds",
       "Histogram of time spent in WAITING phase for request.", queue_},
      {"vllm:request_inference_time_seconds",
       "Histogram of time spent in RUNNING phase for request.", inference_},
      {"vllm:request_prefill_time_seconds",
       "Histogram of time spent in PREFILL phase for request.", prefill_},
      {"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
       decode_},
      {"vllm:request_prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_},
      {"vllm:request_generation_tokens", "Number of generation tokens processed.",
       generation_tokens_},
      {"vllm:request_params_n", "Histogram of the n request parameter.", params_n_},
      {"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
       params_max_tokens_},
  };
  for (const auto& h : hs) {
    header(out, h.name, "histogram", h.help);
    h.h.render(out, h.name, l);
  }
  return out;
}

}  // namespace strata::server
