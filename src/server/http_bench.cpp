#include "server/http_bench.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <random>

#include "core/check.h"

namespace strata::server::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Job {
  std::string body;
  int64_t prompt_len = 0;
};

// One streaming POST: connect, send, read the SSE stream as it arrives, measure.
class StreamRequest : public std::enable_shared_from_this<StreamRequest> {
 public:
  StreamRequest(asio::io_context& ioc, tcp::endpoint ep, const BenchConfig& c, const Job& job,
                Clock::time_point t0, std::function<void(RequestResult)> done)
      : stream_(ioc), ep_(ep), t0_(t0), done_(std::move(done)) {
    req_.method(http::verb::post);
    req_.target(c.endpoint);
    req_.version(11);
    req_.set(http::field::host, c.host);
    req_.set(http::field::content_type, "application/json");
    if (!c.api_key.empty()) req_.set(http::field::authorization, "Bearer " + c.api_key);
    req_.body() = job.body;
    req_.prepare_payload();
    result_.prompt_len = job.prompt_len;
    parser_.body_limit(std::numeric_limits<uint64_t>::max());
  }

  void start() {
    start_ = Clock::now();
    result_.start = seconds(start_ - t0_);
    stream_.async_connect(ep_, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->finish("connect: " + ec.message());
      http::async_write(self->stream_, self->req_,
                        [self](beast::error_code ec, size_t) {
                          if (ec) return self->finish("write: " + ec.message());
                          self->read();
                        });
    });
  }

 private:
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  void read() {
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->on_read(ec);
                          });
  }

  void on_read(beast::error_code ec) {
    const auto now = Clock::now();
    if (parser_.is_header_done() && parser_.get().result_int() != 200) {
      if (!ec && !parser_.is_done()) return read();
      return finish(fmt::format("HTTP {}: {}", parser_.get().result_int(),
                                parser_.get().body().substr(0, 300)));
    }
    if (ec && ec != http::error::end_of_stream) return finish("read: " + ec.message());
    consume_events(now);
    if (parser_.is_done() || ec) return finish("");
    read();
  }

  // Parses complete "data: ...\n\n" events out of the body received so far.
  void consume_events(Clock::time_point now) {
    std::string& body = parser_.get().body();
    for (;;) {
      const size_t end = body.find("\n\n", scanned_);
      if (end == std::string::npos) break;
      std::string event = body.substr(scanned_, end - scanned_);
      scanned_ = end + 2;
      if (event.rfind("data: ", 0) != 0) continue;  // comments, pings
      const std::string data = event.substr(6);
      if (data == "[DONE]") continue;
      nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        error_ = j["error"].value("message", "error event");
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object())
        result_.output_tokens = j["usage"].value("completion_tokens", result_.output_tokens);
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const double t = seconds(now - start_);
        if (!got_first_) {
          got_first_ = true;
          result_.ttft = t;
        } else {
          result_.itl.push_back(t - last_);
        }
        last_ = t;
        chunks_++;
      }
    }
    // Keep the body small: drop what was scanned.
    if (scanned_ > 65536) {
      body.erase(0, scanned_);
      scanned_ = 0;
    }
  }

  void finish(const std::string& error) {
    if (finished_) return;
    finished_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    result_.error = !error.empty() ? error : error_;
    result_.success = result_.error.empty() && got_first_;
    if (result_.error.empty() && !got_first_) result_.error = "no chunk with choices";
    result_.latency = last_;
    if (result_.output_tokens == 0) result_.output_tokens = chunks_;  // no usage chunk
    done_(std::move(result_));
  }

  beast::tcp_stream stream_;
  tcp::endpoint ep_;
  Clock::time_point t0_, start_;
  std::function<void(RequestResult)> done_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  RequestResult result_;
  size_t scanned_ = 0;
  bool got_first_ = false, finished_ = false;
  double last_ = 0;
  int64_t chunks_ = 0;
  std::string error_;
};

// A blocking GET (the model lookup).
std::string http_get(const tcp::endpoint& ep, const BenchConfig& c, const std::string& target) {
  asio::io_context ioc;
  beast::tcp_stream s(ioc);
  s.expires_after(std::chrono::seconds(30));
  s.connect(ep);
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, c.host);
  if (!c.api_key.empty()) req.set(http::field::authorization, "Bearer " + c.api_key);
  http::write(s, req);
  beast::flat_buffer b;
  http::response<http::string_body> res;
  http::read(s, b, res);
  if (res.result_int() != 200)
    fail("bench serve: GET {} answered {}: {}", target, res.result_int(), res.body().substr(0, 300));
  return res.body();
}

std::vector<Job> make_jobs(const BenchConfig& c, int64_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> token(100, std::max(101, c.max_token_id - 1));
  auto len = [&](int64_t base) {
    const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(base * (1 - c.range_ratio))));
    const int64_t hi = std::max<int64_t>(lo, static_cast<int64_t>(std::ceil(base * (1 + c.range_ratio))));
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<int32_t> prefix(c.prefix_len);
  for (auto& t : prefix) t = token(rng);
  const bool chat = c.endpoint.find("chat") != std::string::npos;
  std::vector<Job> jobs;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int32_t> ids = prefix;
    const int64_t in = len(c.input_len), out = len(c.output_len);
    for (int64_t k = 0; k < in; ++k) ids.push_back(token(rng));
    nlohmann::ordered_json body;
    body["model"] = c.model;
    if (chat) {
      // Chat takes text: one word per intended token (the server's count is what is reported).
      std::string text;
      for (int32_t id : ids) text += fmt::format(" w{}", id % 1000);
      body["messages"] = {{{"role", "user"}, {"content", text}}};
      body["max_completion_tokens"] = out;
    } else {
      body["prompt"] = ids;
      body["max_tokens"] = out;
    }
    body["temperature"] = c.temperature;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    if (c.ignore_eos) body["ignore_eos"] = true;
    jobs.push_back({body.dump(), static_cast<int64_t>(ids.size())});
  }
  return jobs;
}

// Runs `jobs` with the arrival process and concurrency cap of `c`.
std::vector<RequestResult> run_jobs(const BenchConfig& c, const tcp::endpoint& ep,
                                    const std::vector<Job>& jobs, std::mt19937_64& rng,
                                    const std::function<void(int64_t, int64_t)>& progress,
                                    Clock::time_point t0) {
  asio::io_context ioc;
  std::vector<RequestResult> results;
  results.reserve(jobs.size());
  size_t next = 0;
  int64_t active = 0;
  std::deque<size_t> ready;  // arrived, waiting for a concurrency slot
  asio::steady_timer arrivals(ioc);
  std::exponential_distribution<double> gap(std::isinf(c.request_rate) ? 1.0 : c.request_rate);

  std::function<void()> launch_ready;
  launch_ready = [&] {
    while (!ready.empty() && (c.max_concurrency <= 0 || active < c.max_concurrency)) {
      const size_t i = ready.front();
      ready.pop_front();
      active++;
      std::make_shared<StreamRequest>(ioc, ep, c, jobs[i], t0, [&](RequestResult r) {
        active--;
        results.push_back(std::move(r));
        if (progress) progress(static_cast<int64_t>(results.size()), static_cast<int64_t>(jobs.size()));
        launch_ready();
      })->start();
    }
  };
  std::function<void()> arrive;
  arrive = [&] {
    if (next >= jobs.size()) return;
    ready.push_back(next++);
    launch_ready();
    if (next >= jobs.size()) return;
    if (std::isinf(c.request_rate)) {
      asio::post(ioc, arrive);
    } else {
      arrivals.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(gap(rng))));
      arrivals.async_wait([&](beast::error_code ec) {
        if (!ec) arrive();
      });
    }
  };
  asio::post(ioc, arrive);
  ioc.run();
  return results;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}
// Linear interpolation between closest ranks (numpy's default percentile).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string pct_name(double p) {
  return std::floor(p) == p ? fmt::format("{}", static_cast<int64_t>(p)) : fmt::format("{}", p);
}

}  // namespace

BenchResult summarize(std::vector<RequestResult> requests, double duration,
                      const std::vector<double>& percentiles) {
  BenchResult r;
  r.duration = duration;
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<std::pair<double, int>> edges;  // request start (+1) / end (-1)
  std::map<int64_t, double> tokens_per_second;  // 1-s bucket -> tokens
  for (const auto& q : requests) {
    if (!q.success) {
      r.failed++;
      if (r.errors.size() < 5 &&
          std::find(r.errors.begin(), r.errors.end(), q.error) == r.errors.end())
        r.errors.push_back(q.error);
      continue;
    }
    r.completed++;
    r.total_input += q.prompt_len;
    r.total_output += q.output_tokens;
    ttft.push_back(q.ttft * 1000);
    e2el.push_back(q.latency * 1000);
    if (q.output_tokens > 1) tpot.push_back((q.latency - q.ttft) * 1000 / static_cast<double>(q.output_tokens - 1));
    for (double g : q.itl) itl.push_back(g * 1000);
    edges.emplace_back(q.start, 1);
    edges.emplace_back(q.start + q.latency, -1);
    // Token timestamps rebuilt from TTFT + ITL (one chunk counted as one token, as vLLM does).
    double t = q.start + q.ttft;
    tokens_per_second[static_cast<int64_t>(t)] += 1;
    for (double g : q.itl) {
      t += g;
      tokens_per_second[static_cast<int64_t>(t)] += 1;
    }
  }
  std::sort(edges.begin(), edges.end());
  int64_t cur = 0;
  for (const auto& [t, d] : edges) r.max_concurrent_requests = std::max(r.max_concurrent_requests, cur += d);
  for (const auto& [s, n] : tokens_per_second) r.max_output_tokens_per_s = std::max(r.max_output_tokens_per_s, n);
  if (duration > 0) {
    r.request_throughput = static_cast<double>(r.completed) / duration;
    r.output_throughput = static_cast<double>(r.total_output) / duration;
    r.total_token_throughput = static_cast<double>(r.total_input + r.total_output) / duration;
  }
  auto add = [&](const char* name, const std::vector<double>& v) {
    r.stats[fmt::format("mean_{}_ms", name)] = mean(v);
    r.stats[fmt::format("median_{}_ms", name)] = percentile(v, 50);
    r.stats[fmt::format("std_{}_ms", name)] = stddev(v);
    for (double p : percentiles) r.stats[fmt::format("p{}_{}_ms", pct_name(p), name)] = percentile(v, p);
  };
  add("ttft", ttft);
  add("tpot", tpot);
  add("itl", itl);
  add("e2el", e2el);
  r.requests = std::move(requests);
  return r;
}

BenchResult run_bench(BenchConfig c, const std::function<void(int64_t, int64_t)>& progress) {
  asio::io_context resolve_ctx;
  tcp::resolver resolver(resolve_ctx);
  beast::error_code ec;
  auto eps = resolver.resolve(c.host, std::to_string(c.port), ec);
  if (ec || eps.empty()) fail("bench serve: cannot resolve {}: {}", c.host, ec.message());
  const tcp::endpoint ep = *eps.begin();
  if (c.model.empty()) {
    nlohmann::json models = nlohmann::json::parse(http_get(ep, c, "/v1/models"), nullptr, false);
    if (models.is_discarded() || !models.contains("data") || models["data"].empty())
      fail("bench serve: /v1/models lists no model; give --model");
    c.model = models["data"][0].value("id", "");
  }
  std::mt19937_64 rng(c.seed);
  const auto t_warm = Clock::now();
  if (c.num_warmups > 0) {
    auto warm = run_jobs(c, ep, make_jobs(c, c.num_warmups, rng), rng, nullptr, t_warm);
    for (const auto& w : warm)
      if (!w.success) fail("bench serve: a warm-up request failed: {}", w.error);
  }
  const auto jobs = make_jobs(c, c.num_prompts, rng);
  const auto t0 = Clock::now();
  auto results = run_jobs(c, ep, jobs, rng, progress, t0);
  const double duration = std::chrono::duration<double>(Clock::now() - t0).count();
  BenchResult r = summarize(std::move(results), duration, c.percentiles);
  r.model = c.model;
  return r;
}

std::string format_report(const BenchConfig& c, const BenchResult& r) {
  std::string o;
  auto line = [&](const std::string& k, const std::string& v) { o += fmt::format("{:<40}{:<10}\n", k, v); };
  auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  o += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line("Successful requests:", std::to_string(r.completed));
  line("Failed requests:", std::to_string(r.failed));
  if (c.max_concurrency > 0) line("Maximum request concurrency:", std::to_string(c.max_concurrency));
  if (!std::isinf(c.request_rate)) line("Request rate configured (RPS):", f2(c.request_rate));
  line("Benchmark duration (s):", f2(r.duration));
  line("Total input tokens:", std::to_string(r.total_input));
  line("Total generated tokens:", std::to_string(r.total_output));
  line("Request throughput (req/s):", f2(r.request_throughput));
  line("Output token throughput (tok/s):", f2(r.output_throughput));
  line("Peak output token throughput (tok/s):", f2(r.max_output_tokens_per_s));
  line("Peak concurrent requests:", f2(static_cast<double>(r.max_concurrent_requests)));
  line("Total Token throughput (tok/s):", f2(r.total_token_throughput));
  const std::pair<const char*, const char*> sections[] = {
      {"ttft", "Time to First Token"},
      {"tpot", "Time per Output Token (excl. 1st token)"},
      {"itl", "Inter-token Latency"},
      {"e2el", "End-to-end Latency"}};
  for (const auto& [key, title] : sections) {
    o += fmt::format("{:-^50}\n", std::string(" ") + title + " ");
    std::string up = key;
    for (char& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    line(fmt::format("Mean {} (ms):", up), f2(r.stats[fmt::format("mean_{}_ms", key)]));
    line(fmt::format("Median {} (ms):", up), f2(r.stats[fmt::format("median_{}_ms", key)]));
    for (double p : c.percentiles)
      line(fmt::format("P{} {} (ms):", pct_name(p), up),
           f2(r.stats[fmt::format("p{}_{}_ms", pct_name(p), key)]));
  }
  o += std::string(50, '=') + "\n";
  for (const auto& e : r.errors) o += "error: " + e + "\n";
  return o;
}

nlohmann::ordered_json result_json(const BenchConfig& c, const BenchResult& r) {
  nlohmann::ordered_json j;
  j["backend"] = "openai";
  j["endpoint"] = c.endpoint;
  j["model_id"] = r.model.empty() ? c.model : r.model;
  j["num_prompts"] = c.num_prompts;
  j["request_rate"] = std::isinf(c.request_rate) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(c.request_rate);
  j["max_concurrency"] = c.max_concurrency > 0 ? nlohmann::ordered_json(c.max_concurrency) : nlohmann::ordered_json(nullptr);
  j["random_input_len"] = c.input_len;
  j["random_output_len"] = c.output_len;
  j["duration"] = r.duration;
  j["completed"] = r.completed;
  j["failed"] = r.failed;
  j["total_input_tokens"] = r.total_input;
  j["total_output_tokens"] = r.total_output;
  j["request_throughput"] = r.request_throughput;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  j["max_output_tokens_per_s"] = r.max_output_tokens_per_s;
  j["max_concurrent_requests"] = r.max_concurrent_requests;
  for (const auto& [k, v] : r.stats.items()) j[k] = v;
  auto& lens_in = j["input_lens"] = nlohmann::ordered_json::array();
  auto& lens_out = j["output_lens"] = nlohmann::ordered_json::array();
  auto& ttfts = j["ttfts"] = nlohmann::ordered_json::array();
  auto& lat = j["latencies"] = nlohmann::ordered_json::array();
  auto& errs = j["errors"] = nlohmann::ordered_json::array();
  for (const auto& q : r.requests) {
    lens_in.push_back(q.prompt_len);
    lens_out.push_back(q.success ? q.output_tokens : 0);
    ttfts.push_back(q.ttft);
    lat.push_back(q.latency);
    errs.push_back(q.error);
  }
  return j;
}

}  // namespace strata::server::bench
