// `strata bench serve`: load an OpenAI-compatible server (strata's or vLLM's) with random
// prompts and report what `vllm bench serve` reports, in its layout, plus a JSON row.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <unistd.h>

#include "command.h"
#include "core/check.h"
#include "server/http_bench.h"

namespace strata::cli {
namespace {

struct BenchServeFlags {
  server::bench::BenchConfig c;
  std::string base_url, request_rate = "inf", percentiles = "99", save_result, label;
};

// "http://host:port" -> host, port.
void parse_base_url(const std::string& url, server::bench::BenchConfig& c) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos) fail("--base-url: only http:// is supported: {}", url);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    c.host = rest;
    c.port = 80;
    return;
  }
  c.host = rest.substr(0, colon);
  try {
    c.port = static_cast<uint16_t>(std::stoul(rest.substr(colon + 1)));
  } catch (...) {
    fail("--base-url: bad port in {}", url);
  }
}

void run(BenchServeFlags& f) {
  auto& c = f.c;
  if (!f.base_url.empty()) parse_base_url(f.base_url, c);
  if (f.request_rate == "inf") {
    c.request_rate = std::numeric_limits<double>::infinity();
  } else {
    try {
      c.request_rate = std::stod(f.request_rate);
    } catch (...) {
      fail("--request-rate must be a number or inf, got \"{}\"", f.request_rate);
    }
    if (!(c.request_rate > 0)) fail("--request-rate must be > 0");
  }
  c.percentiles.clear();
  for (size_t pos = 0; pos < f.percentiles.size();) {
    size_t comma = std::min(f.percentiles.find(',', pos), f.percentiles.size());
    double p = std::stod(f.percentiles.substr(pos, comma - pos));
    if (!(p > 0 && p < 100)) fail("--metric-percentiles: {} is not in (0, 100)", p);
    c.percentiles.push_back(p);
    pos = comma + 1;
  }
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && c.api_key.empty()) c.api_key = key;
  const bool tty = isatty(fileno(stderr));
  auto progress = [&](int64_t done, int64_t total) {
    if (!c.progress) return;
    const int width = 40;
    const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    if (tty || done == total || done % std::max<int64_t>(1, total / 10) == 0)
      std::fprintf(stderr, "%s[%s%s] %lld/%lld%s", tty ? "\r" : "", std::string(filled, '#').c_str(),
                   std::string(width - filled, ' ').c_str(), static_cast<long long>(done),
                   static_cast<long long>(total), tty && done < total ? "" : "\n");
  };
  std::fprintf(stderr, "bench serve: %lld prompts (%lld in / %lld out) against http://%s:%u%s\n",
               static_cast<long long>(c.num_prompts), static_cast<long long>(c.input_len),
               static_cast<long long>(c.output_len), c.host.c_str(), c.port, c.endpoint.c_str());
  auto r = server::bench::run_bench(c, progress);
  std::fputs(server::bench::format_report(c, r).c_str(), stdout);
  auto j = server::bench::result_json(c, r);
  if (!f.label.empty()) j["label"] = f.label;
  if (!f.save_result.empty()) {
    std::ofstream out(f.save_result);
    if (!out) fail("--save-result: cannot write {}", f.save_result);
    out << j.dump() << "\n";
  }
  if (r.completed == 0) fail("bench serve: no request succeeded");
}

void setup(CLI::App& bench) {
  auto* sub = bench.add_subcommand(
      "serve", "Benchmark an OpenAI-compatible server as `vllm bench serve` does");
  static BenchServeFlags f;
  auto& c = f.c;
  sub->add_option("--base-url", f.base_url, "http://HOST:PORT (instead of --host / --port)");
  sub->add_option("--host", c.host)->capture_default_str();
  sub->add_option("--port", c.port)->capture_default_str();
  sub->add_option("--endpoint", c.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  sub->add_option("--model", c.model, "Model name (default: the first of /v1/models)");
  sub->add_option("--num-prompts", c.num_prompts)->capture_default_str()->check(CLI::Range(1, 10000000));
  sub->add_option("--random-input-len", c.input_len)->capture_default_str()->check(CLI::Range(1, 10000000));
  sub->add_option("--random-output-len", c.output_len)->capture_default_str()->check(CLI::Range(1, 10000000));
  sub->add_option("--random-range-ratio", c.range_ratio, "Lengths uniform in [len(1-r), len(1+r)]")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--random-prefix-len", c.prefix_len, "Shared prefix tokens")->capture_default_str();
  sub->add_option("--max-token-id", c.max_token_id,
                  "Random prompt ids are drawn from [100, this)")
      ->capture_default_str();
  sub->add_option("--request-rate", f.request_rate, "Requests per second (Poisson) or inf")
      ->capture_default_str();
  sub->add_option("--max-concurrency", c.max_concurrency, "Most requests in flight (0: no cap)")
      ->capture_default_str();
  sub->add_option("--num-warmups", c.num_warmups, "Requests run first and not counted")
      ->capture_default_str();
  sub->add_flag("--ignore-eos", c.ignore_eos, "Send ignore_eos so every request has its length");
  sub->add_option("--temperature", c.temperature)->capture_default_str();
  sub->add_option("--seed", c.seed)->capture_default_str();
  sub->add_option("--metric-percentiles", f.percentiles, "Comma-separated, e.g. 50,90,99")
      ->capture_default_str();
  sub->add_option("--save-result", f.save_result, "Write the JSON row to this file");
  sub->add_option("--label", f.label, "Free text stored in the JSON row");
  sub->add_flag("!--no-progress", c.progress, "No progress bar");
  sub->callback([] { run(f); });
}

}  // namespace
STRATA_BENCH_COMMAND(setup);
}  // namespace strata::cli
