// `strata bench serve`'s client and statistics against a fake OpenAI stream whose timing is
// known: the chunk count, usage tokens, concurrency cap, TTFT floor and the percentile math.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "server/http_bench.h"
#include "server/http_server.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;

// Answers every POST with `chunks` SSE choice chunks 5 ms apart, then a usage chunk and [DONE];
// counts the requests in flight at once.
struct FakeOpenAI {
  std::atomic<int> active{0}, peak{0}, served{0};
  std::unique_ptr<HttpServer> server;
  explicit FakeOpenAI(int chunks) {
    HttpRoutes routes;
    routes.add("GET", "/v1/models", [](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
      ex->respond(200, "application/json", R"({"object":"list","data":[{"id":"fake","root":"fake"}]})");
    });
    routes.add("POST", "/v1/completions",
               [this, chunks](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
                 auto body = nlohmann::json::parse(req.body);
                 EXPECT_EQ(body["model"], "fake");
                 EXPECT_TRUE(body["stream"].get<bool>());
                 EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
                 const int now = ++active;
                 int p = peak.load();
                 while (now > p && !peak.compare_exchange_weak(p, now)) {
                 }
                 ex->begin_stream("text/event-stream");
                 std::thread([this, ex, chunks] {
                   for (int i = 0; i < chunks; ++i) {
                     std::this_thread::sleep_for(5ms);
                     ex->post([ex] { ex->write("data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n"); });
                   }
                   active--;
                   served++;
                   ex->post([ex, chunks] {
                     ex->write("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":" +
                               std::to_string(chunks * 2) + ",\"total_tokens\":0}}\n\n");
                     ex->write("data: [DONE]\n\n");
                     ex->end_stream();
                   });
                 }).detach();
               });
    server = std::make_unique<HttpServer>(std::move(routes), HttpLimits{}, 2);
    server->listen("127.0.0.1", 0);
    server->start();
  }
};

TEST(BenchServe, MeasuresEveryRequestAndHonoursTheConcurrencyCap) {
  FakeOpenAI fake(/*chunks=*/6);
  bench::BenchConfig c;
  c.port = fake.server->port();
  c.num_prompts = 24;
  c.num_warmups = 2;
  c.input_len = 8;
  c.output_len = 6;
  c.max_concurrency = 4;
  c.percentiles = {50, 99};
  int64_t last_progress = 0;
  auto r = bench::run_bench(c, [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 24);
    last_progress = done;
  });
  EXPECT_EQ(last_progress, 24);
  EXPECT_EQ(fake.served.load(), 26);  // warm-ups included
  EXPECT_EQ(r.completed, 24);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.total_output, 24 * 12);  // from the usage chunks, not the chunk count
  EXPECT_EQ(r.total_input, 24 * 8);
  EXPECT_LE(fake.peak.load(), 4);
  EXPECT_LE(r.max_concurrent_requests, 4);
  for (const auto& q : r.requests) {
    EXPECT_TRUE(q.success) << q.error;
    EXPECT_GE(q.ttft, 0.004);
    EXPECT_EQ(q.itl.size(), 5u);
    EXPECT_GE(q.latency, q.ttft);
  }
  EXPECT_GE(r.stats["mean_ttft_ms"].get<double>(), 4.0);
  EXPECT_TRUE(r.stats.contains("p99_itl_ms"));
  EXPECT_TRUE(r.stats.contains("median_e2el_ms"));
  const std::string report = bench::format_report(c, r);
  EXPECT_NE(report.find("Successful requests:"), std::string::npos);
  EXPECT_NE(report.find("P99 TTFT (ms):"), std::string::npos);
  EXPECT_EQ(bench::result_json(c, r)["completed"], 24);
  EXPECT_EQ(bench::result_json(c, r)["model_id"], "fake");  // found through /v1/models
}

TEST(BenchServe, FailedRequestsAreCountedWithTheirError) {
  HttpRoutes routes;
  routes.add("POST", "/v1/completions", [](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->respond(400, "application/json", R"({"error":{"message":"nope"}})");
  });
  HttpServer s(std::move(routes), HttpLimits{}, 1);
  s.listen("127.0.0.1", 0);
  s.start();
  bench::BenchConfig c;
  c.port = s.port();
  c.model = "m";
  c.num_prompts = 3;
  c.input_len = 4;
  auto r = bench::run_bench(c);
  EXPECT_EQ(r.completed, 0);
  EXPECT_EQ(r.failed, 3);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("HTTP 400"), std::string::npos);
}

TEST(BenchServe, SummaryMatchesHandComputedFigures) {
  std::vector<bench::RequestResult> rs(4);
  // TTFTs 10, 20, 30, 40 ms; latency = TTFT + 90 ms; 10 tokens each (TPOT 10 ms).
  for (int i = 0; i < 4; ++i) {
    rs[i].success = true;
    rs[i].prompt_len = 5;
    rs[i].output_tokens = 10;
    rs[i].start = 0.0;
    rs[i].ttft = 0.01 * (i + 1);
    rs[i].latency = rs[i].ttft + 0.09;
    rs[i].itl.assign(9, 0.01);
  }
  auto r = bench::summarize(rs, 2.0, {50, 99});
  EXPECT_NEAR(r.stats["mean_ttft_ms"].get<double>(), 25.0, 1e-9);
  EXPECT_NEAR(r.stats["median_ttft_ms"].get<double>(), 25.0, 1e-9);
  // numpy: percentile([10,20,30,40], 99) = 30 + 0.97 * 10.
  EXPECT_NEAR(r.stats["p99_ttft_ms"].get<double>(), 39.7, 1e-9);
  EXPECT_NEAR(r.stats["mean_tpot_ms"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(r.stats["mean_itl_ms"].get<double>(), 10.0, 1e-9);
  EXPECT_EQ(r.max_concurrent_requests, 4);
  EXPECT_NEAR(r.output_throughput, 20.0, 1e-12);
  EXPECT_NEAR(r.request_throughput, 2.0, 1e-12);
  EXPECT_NEAR(r.total_token_throughput, 30.0, 1e-12);
}

}  // namespace
}  // namespace strata::server
