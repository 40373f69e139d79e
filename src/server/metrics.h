// Prometheus metrics with vLLM's names, labels and bucket edges (spec/serving.md 1.5), so
// existing dashboards and routers read strata as they read vLLM. Engine gauges and token
// counters come from engine::EngineStats at scrape time; per-request histograms are observed
// by the server as outputs arrive (RequestTimer). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"

namespace strata::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // `name` without suffixes; `labels` like model_name="x",engine="0".
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Extra gauges the server adds (not engine state).
struct ServerGauges {
  int64_t open_connections = 0;
  int64_t requests_in_flight = 0;  // engine requests the server waits on
};

class ServerMetrics {
 public:
  ServerMetrics(std::string model_name, int64_t max_model_len, std::string cache_info_labels);

  // One engine request's life, observed on the I/O side.
  struct RequestTimer {
    std::chrono::steady_clock::time_point arrival, first_token, last_token;
    bool first_token_seen = false;
    int64_t generated = 0;
  };
  // An output arrived at `now` (tokens of every completion counted together, as vLLM's
  // iteration stats do).
  void on_output(RequestTimer& t, const engine::RequestOutput& out,
                 std::chrono::steady_clock::time_point now);
  // The request finished (finish_reason of its first completion; "abort" for aborts).
  void on_finished(RequestTimer& t, const engine::RequestOutput& last, const char* finish_reason,
                   int32_t n, int64_t max_tokens, std::chrono::steady_clock::time_point now);

  std::string render(const engine::EngineStats& engine, const ServerGauges& server) const;

 private:
  std::string labels_;  // model_name="...",engine="0"
  std::string cache_info_labels_;
  mutable std::mutex mu_;
  Histogram ttft_, itl_, tpot_req_, e2e_, queue_, prefill_, decode_, inference_;
  Histogram prompt_tokens_, generation_tokens_, params_n_, params_max_tokens_;
  std::map<std::string, uint64_t> success_;  // finished_reason -> count
};

// Prometheus label value escaping (\\, \", \n).
std::string prometheus_escape(const std::string& v);

}  // namespace strata::server
