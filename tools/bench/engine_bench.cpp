#include "engine_bench.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "core/check.h"
#include "progress.h"

namespace strata::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int64_t len, int64_t vocab) {
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = static_cast<int32_t>(id(rng));
  return p;
}

engine::EngineRequest fixed_request(std::string id, std::vector<int32_t> prompt, int64_t out) {
  engine::EngineRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.params.temperature = 0.f;  // greedy: the benchmark measures the engine, not the draw
  r.params.max_tokens = out;
  r.params.ignore_eos = true;  // every request generates exactly `out` tokens
  return r;
}

}  // namespace

Stats summarize(std::vector<double> v) {
  Stats s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.median = percentile(v, 50);
  s.p10 = percentile(v, 10);
  s.p25 = percentile(v, 25);
  s.p75 = percentile(v, 75);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  s.max = v.back();
  return s;
}

LatencyResult run_latency(engine::LLMEngine& engine, int64_t vocab, const LatencyOptions& o) {
  if (o.batch_size < 1 || o.input_len < 1 || o.output_len < 1 || o.iters < 1 || o.warmup_iters < 0)
    fail("bench latency: --batch-size, --input-len, --output-len and --num-iters must be >= 1");
  std::mt19937_64 rng(7);
  std::vector<double> iteration_s, step_ms, prefill_ms;
  ProgressBar bar(o.warmup_iters + o.iters, "iterations");
  for (int64_t it = 0; it < o.warmup_iters + o.iters; ++it) {
    const bool timed = it >= o.warmup_iters;
    for (int64_t b = 0; b < o.batch_size; ++b)
      if (!engine.add_request(fixed_request(fmt::format("lat-{}-{}", it, b),
                                            random_prompt(rng, o.input_len, vocab), o.output_len)))
        fail("bench latency: the engine refused a request (waiting queue full)");
    const Clock::time_point t0 = Clock::now();
    int64_t with_first = 0;
    std::map<std::string, bool> started;
    Clock::time_point prev = t0;
    while (engine.has_unfinished()) {
      const std::vector<engine::RequestOutput> outs = engine.step();
      const Clock::time_point now = Clock::now();
      const bool all_started = with_first == o.batch_size;
      for (const auto& out : outs)
        if (!out.completions.empty() && !started[out.request_id]) {
          started[out.request_id] = true;
          ++with_first;
        }
      if (timed && all_started) step_ms.push_back(1e3 * seconds(prev, now));
      if (timed && !all_started && with_first == o.batch_size)
        prefill_ms.push_back(1e3 * seconds(t0, now));
      prev = now;
    }
    if (timed) iteration_s.push_back(seconds(t0, Clock::now()));
    bar.update(it + 1);
  }
  bar.finish();
  return {summarize(iteration_s), summarize(step_ms), summarize(prefill_ms)};
}

ThroughputResult run_throughput(engine::LLMEngine& engine, int64_t vocab,
                                const ThroughputOptions& o) {
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1)
    fail("bench throughput: --num-prompts, --input-len and --output-len must be >= 1");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1))
    fail("bench throughput: --random-range-ratio must be in [0, 1), got {}", o.range_ratio);
  std::mt19937_64 rng(o.seed);
  auto length = [&](int64_t len) {
    if (o.range_ratio == 0) return len;
    const auto lo = std::max<int64_t>(1, static_cast<int64_t>(len * (1 - o.range_ratio)));
    const auto hi = std::max(lo, static_cast<int64_t>(len * (1 + o.range_ratio)));
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  struct Timing {
    Clock::time_point submitted, first, done;
    int64_t output = 0;
    bool have_first = false;
  };
  std::vector<engine::EngineRequest> requests;
  for (int64_t i = 0; i < o.num_prompts; ++i)
    requests.push_back(fixed_request(fmt::format("tp-{}", i),
                                     random_prompt(rng, length(o.input_len), vocab),
                                     length(o.output_len)));
  ThroughputResult r;
  for (const auto& q : requests) r.prompt_tokens += static_cast<int64_t>(q.prompt.size());

  const int64_t concurrency = o.max_concurrency > 0 ? o.max_concurrency : o.num_prompts;
  std::map<std::string, Timing> timing;
  size_t next = 0;
  int64_t in_flight = 0;
  const int64_t preempt0 = engine.stats().preemptions;
  ProgressBar bar(o.num_prompts, "requests");
  const Clock::time_point t0 = Clock::now();
  while (next < requests.size() || engine.has_unfinished()) {
    while (next < requests.size() && in_flight < concurrency) {
      Timing& t = timing[requests[next].id];
      t.submitted = Clock::now();
      if (!engine.add_request(std::move(requests[next])))
        fail("bench throughput: the engine refused a request (waiting queue full)");
      ++next;
      ++in_flight;
    }
    const std::vector<engine::RequestOutput> outs = engine.step();
    const Clock::time_point now = Clock::now();
    for (const auto& out : outs) {
      Timing& t = timing[out.request_id];
      for (const auto& c : out.completions) {
        if (!c.token_ids.empty() && !t.have_first) {
          t.have_first = true;
          t.first = now;
        }
        t.output += static_cast<int64_t>(c.token_ids.size());
      }
      if (out.finished) {
        t.done = now;
        --in_flight;
        ++r.completed;
        if (!out.error.empty()) fail("bench throughput: request {} failed: {}", out.request_id, out.error);
        bar.update(r.completed);
      }
    }
  }
  bar.finish();
  r.seconds = seconds(t0, Clock::now());
  std::vector<double> ttft, tpot, e2e;
  for (const auto& [id, t] : timing) {
    r.output_tokens += t.output;
    ttft.push_back(1e3 * seconds(t.submitted, t.first));
    e2e.push_back(seconds(t.submitted, t.done));
    if (t.output > 1) tpot.push_back(1e3 * seconds(t.first, t.done) / static_cast<double>(t.output - 1));
  }
  r.requests_per_s = static_cast<double>(r.completed) / r.seconds;
  r.output_tokens_per_s = static_cast<double>(r.output_tokens) / r.seconds;
  r.total_tokens_per_s = static_cast<double>(r.output_tokens + r.prompt_tokens) / r.seconds;
  r.ttft_ms = summarize(ttft);
  r.tpot_ms = summarize(tpot);
  r.e2e_s = summarize(e2e);
  r.preemptions = engine.stats().preemptions - preempt0;
  return r;
}

}  // namespace strata::bench
