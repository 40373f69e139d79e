// `strata bench latency` and `strata bench throughput`: vLLM's offline benchmarks over one
// LLMEngine (tools/bench/engine_bench.h), on `--load-format dummy --preset P` or a checkpoint.
// Each prints a table and, with --json FILE, writes one JSON row (commit, GPU, model, dtype,
// lengths, figures) that docs/BENCHMARKS.md is built from.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench/engine_bench.h"
#include "command.h"
#include "core/check.h"
#include "engine/device.h"
#include "engine_flags.h"
#include "io/atomic_file.h"
#include "model_source_flags.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::cli {
namespace {

struct EngineBenchFlags {
  ModelSourceFlags src;
  EngineFlags engine;
  std::string json_out, label;
  bench::LatencyOptions latency;
  bench::ThroughputOptions throughput;
  std::vector<int64_t> concurrency;  // throughput: one run per level
};

struct Loaded {
  std::unique_ptr<model::NemotronHModel> model;
  std::unique_ptr<engine::LLMEngine> engine;
  nlohmann::json row;
};

Loaded load(const EngineBenchFlags& f, const char* what) {
  Loaded l;
  engine::EngineConfig ec = engine_config(f.engine);
  {
    OpContext probe;
    engine::prepare_device(ec.executor.device, probe);
  }
  l.model = load_from_flags(f.src, ec.executor.device, /*sampling=*/true, what);
  ec.eos_ids = l.model->config().eos_token_ids;
  l.engine = std::make_unique<engine::LLMEngine>(*l.model, nullptr, ec);
  std::fprintf(stderr, "%s\n", l.engine->executor().describe_pools().c_str());
  const bool gpu = ec.executor.device == Device::Cuda;
  l.row["bench"] = what;
  l.row["commit"] = build_commit();
  l.row["gpu"] = gpu ? cuda::device_description() : "host";
  l.row["model"] = l.model->load_report().source;
  l.row["dtype"] = f.src.dtype;
  l.row["label"] = f.label;
  l.row["max_num_seqs"] = f.engine.max_num_seqs;
  l.row["max_num_batched_tokens"] = f.engine.max_num_batched_tokens;
  l.row["cuda_graphs"] = gpu && !f.engine.enforce_eager;
  l.row["pools"] = l.engine->executor().describe_pools();
  return l;
}

nlohmann::json stats_json(const bench::Stats& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"p10", s.p10}, {"p25", s.p25},
          {"p75", s.p75},   {"p90", s.p90},       {"p99", s.p99}, {"max", s.max},
          {"count", s.count}};
}

void print_stats(const char* name, const bench::Stats& s) {
  std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f |\n", name, s.mean, s.median, s.p90, s.p99,
              s.max);
}

void write_row(const EngineBenchFlags& f, const nlohmann::json& row) {
  if (!f.json_out.empty()) io::write_file_atomic(f.json_out, row.dump(2) + "\n");
}

void run_latency(const EngineBenchFlags& f) {
  Loaded l = load(f, "latency");
  const bench::LatencyResult r =
      bench::run_latency(*l.engine, l.model->config().vocab_size, f.latency);
  std::printf("bench latency: %s, batch %lld, input %lld, output %lld, %lld iterations (%s)\n",
              l.row["model"].get<std::string>().c_str(),
              static_cast<long long>(f.latency.batch_size),
              static_cast<long long>(f.latency.input_len),
              static_cast<long long>(f.latency.output_len), static_cast<long long>(f.latency.iters),
              l.row["gpu"].get<std::string>().c_str());
  std::printf("| | mean | median | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
  print_stats("batch latency (s)", r.iteration_s);
  print_stats("prefill until every first token (ms)", r.prefill_ms);
  print_stats("per output token, decode step (ms)", r.step_ms);
  nlohmann::json row = l.row;
  row["batch_size"] = f.latency.batch_size;
  row["input_len"] = f.latency.input_len;
  row["output_len"] = f.latency.output_len;
  row["iters"] = f.latency.iters;
  row["latency_s"] = stats_json(r.iteration_s);
  row["prefill_ms"] = stats_json(r.prefill_ms);
  row["decode_step_ms"] = stats_json(r.step_ms);
  write_row(f, row);
}

void run_throughput(const EngineBenchFlags& f) {
  Loaded l = load(f, "throughput");
  // One engine, one run per concurrency (the model loads once); each run is a JSON row.
  const std::vector<int64_t> levels =
      f.concurrency.empty() ? std::vector<int64_t>{f.throughput.max_concurrency} : f.concurrency;
  nlohmann::json rows = nlohmann::json::array();
  {
    // Warm-up (untimed): one short request, so the first level's TTFT does not pay for the
    // engine's first steps (kernel plans, slab allocations).
    bench::ThroughputOptions w;
    w.num_prompts = 1;
    w.input_len = std::min<int64_t>(f.throughput.input_len, 64);
    w.output_len = 4;
    w.max_concurrency = 1;
    (void)bench::run_throughput(*l.engine, l.model->config().vocab_size, w);
  }
  for (int64_t c : levels) {
    bench::ThroughputOptions o = f.throughput;
    o.max_concurrency = c;
    if (f.throughput.num_prompts == 0) o.num_prompts = std::max<int64_t>(c, 1);
    const bench::ThroughputResult r = bench::run_throughput(*l.engine, l.model->config().vocab_size, o);
    std::printf(
        "bench throughput: %s, %lld prompts, input %lld, output %lld, concurrency %lld (%s)\n",
        l.row["model"].get<std::string>().c_str(), static_cast<long long>(o.num_prompts),
        static_cast<long long>(o.input_len), static_cast<long long>(o.output_len),
        static_cast<long long>(c), l.row["gpu"].get<std::string>().c_str());
    std::printf(
        "%.2f s: %.2f requests/s, %.1f output tokens/s, %.1f total tokens/s (%lld prompt + %lld "
        "output tokens, %lld preemptions)\n",
        r.seconds, r.requests_per_s, r.output_tokens_per_s, r.total_tokens_per_s,
        static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.output_tokens),
        static_cast<long long>(r.preemptions));
    std::printf("| | mean | median | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
    print_stats("TTFT (ms)", r.ttft_ms);
    print_stats("TPOT (ms)", r.tpot_ms);
    print_stats("E2E (s)", r.e2e_s);
    std::fflush(stdout);
    nlohmann::json row = l.row;
    row["num_prompts"] = o.num_prompts;
    row["input_len"] = o.input_len;
    row["output_len"] = o.output_len;
    row["random_range_ratio"] = o.range_ratio;
    row["max_concurrency"] = c;
    row["seconds"] = r.seconds;
    row["requests_per_s"] = r.requests_per_s;
    row["output_tokens_per_s"] = r.output_tokens_per_s;
    row["total_tokens_per_s"] = r.total_tokens_per_s;
    row["prompt_tokens"] = r.prompt_tokens;
    row["output_tokens"] = r.output_tokens;
    row["preemptions"] = r.preemptions;
    row["ttft_ms"] = stats_json(r.ttft_ms);
    row["tpot_ms"] = stats_json(r.tpot_ms);
    row["e2e_s"] = stats_json(r.e2e_s);
    rows.push_back(row);
    write_row(f, levels.size() == 1 ? rows[0] : rows);  // after each level: a cut run keeps its rows
  }
}

void add_common(CLI::App* sub, EngineBenchFlags& f) {
  add_model_source_flags(sub, f.src);
  add_engine_flags(sub, f.engine);
  sub->add_option("--json", f.json_out, "Also write the results as one JSON row to this file");
  sub->add_option("--label", f.label, "Free text recorded with the results");
}

void setup_engine_benches(CLI::App& bench) {
  auto f = std::make_shared<EngineBenchFlags>();
  CLI::App* lat = bench.add_subcommand(
      "latency", "Latency of one batch of fixed-length requests (vllm bench latency)");
  add_common(lat, *f);
  lat->add_option("--batch-size", f->latency.batch_size, "Requests per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  lat->add_option("--input-len", f->latency.input_len, "Prompt tokens per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  lat->add_option("--output-len", f->latency.output_len, "Generated tokens per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  lat->add_option("--num-iters", f->latency.iters, "Timed iterations")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  lat->add_option("--num-iters-warmup", f->latency.warmup_iters, "Untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  lat->callback([f] { run_latency(*f); });

  auto g = std::make_shared<EngineBenchFlags>();
  g->throughput.num_prompts = 0;  // default: as many requests as each run's concurrency
  CLI::App* tp = bench.add_subcommand(
      "throughput", "Offline throughput of many requests (vllm bench throughput)");
  add_common(tp, *g);
  tp->add_option("--num-prompts", g->throughput.num_prompts,
                 "Requests per run; 0 = as many as the run's concurrency")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  tp->add_option("--input-len", g->throughput.input_len, "Prompt tokens per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  tp->add_option("--output-len", g->throughput.output_len, "Generated tokens per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  tp->add_option("--random-range-ratio", g->throughput.range_ratio,
                 "Lengths drawn uniformly in [len*(1-r), len*(1+r)]; 0 = fixed")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  tp->add_option("--max-concurrency", g->concurrency,
                 "Requests in flight at most; several (1,8,64) run one after another on the same "
                 "engine; 0 = all at once")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  tp->add_option("--seed", g->throughput.seed, "Seed of the random prompts and lengths")
      ->capture_default_str();
  tp->callback([g] { run_throughput(*g); });
}

}  // namespace

STRATA_BENCH_COMMAND(setup_engine_benches);

}  // namespace strata::cli
