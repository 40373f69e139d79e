// `strata serve`: the OpenAI-compatible server (vLLM's flag names where they apply). Loads the
// model (a progress line while it loads, the load report when done), starts the engine on its
// own thread and the HTTP server on a few I/O threads, prints the listening address, and shuts
// down cleanly on SIGINT / SIGTERM.
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include "command.h"
#include "core/check.h"
#include "core/log.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "model_source_flags.h"
#include "serve_setup.h"
#include "server/server.h"

namespace strata::cli {
namespace {

struct ServeFlags {
  ServingFlags serving;
  std::string host = "127.0.0.1", api_key;
  uint16_t port = 8000;
  int http_threads = 2;
  double shutdown_timeout = 0;
  size_t max_body_bytes = 8u << 20;
  double request_timeout = 30;
};

// A line that says the model is still loading (elapsed seconds), replaced in place on a
// terminal, once every 10 s otherwise.
class LoadingLine {
 public:
  explicit LoadingLine(std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this] {
      const auto t0 = std::chrono::steady_clock::now();
      const bool tty = isatty(fileno(stderr));
      int ticks = 0;
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (++ticks % (tty ? 5 : 100) != 0 || done_) continue;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, tty ? "\rserve: loading %s ... %.1f s" : "serve: loading %s ... %.0f s\n",
                     what_.c_str(), s);
        printed_ = tty;
      }
    });
  }
  ~LoadingLine() {
    done_ = true;
    thread_.join();
    if (printed_) std::fprintf(stderr, "\n");
  }

 private:
  std::string what_;
  std::atomic<bool> done_{false};
  bool printed_ = false;
  std::thread thread_;
};

void run_serve(const ServeFlags& f) {
  auto served = build_serving(f.serving, "serve",
                              [](const std::string& what, const std::function<void()>& load) {
                                LoadingLine line(what);
                                load();
                              });

  server::ServerOptions options;
  options.host = f.host;
  options.port = f.port;
  options.api_key = f.api_key;
  if (options.api_key.empty())
    if (const char* env = std::getenv("VLLM_API_KEY")) options.api_key = env;
  options.io_threads = f.http_threads;
  options.shutdown_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.shutdown_timeout * 1000));
  options.limits.max_body_bytes = f.max_body_bytes;
  options.limits.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout * 1000));
  options.cache_info_labels = served->cache_info_labels;

  server::OpenAIServer server(served->ctx, server::make_async_engine_client(std::move(served->engine)),
                              options);
  server.start();
  log::info("serve: model \"{}\", max_model_len {}", served->ctx.served_model_name,
            served->ctx.max_model_len);
  // The line scripts wait for (the port is the real one when --port 0 was given).
  std::fprintf(stderr, "serve: listening on http://%s:%u (Ctrl-C to stop)\n", f.host.c_str(),
               static_cast<unsigned>(server.port()));
  std::fflush(stderr);
  server.run_until_shutdown();
  log::info("serve: stopped");
}

void setup(CLI::App& app) {
  auto* sub = app.add_subcommand("serve", "Serve a model over vLLM's OpenAI-compatible HTTP API");
  static ServeFlags f;
  add_serving_flags(sub, f.serving);
  sub->add_option("--host", f.host, "Address to listen on (default 127.0.0.1)");
  sub->add_option("--port", f.port, "Port (default 8000; 0 picks a free one)");
  sub->add_option("--api-key", f.api_key,
                  "Require `Authorization: Bearer KEY` on the API (also VLLM_API_KEY)");
  sub->add_option("--http-threads", f.http_threads, "HTTP I/O threads (default 2)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--shutdown-timeout", f.shutdown_timeout,
                  "On SIGINT/SIGTERM, seconds to let in-flight requests finish before aborting "
                  "them (default 0)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--max-request-body-bytes", f.max_body_bytes,
                  "Largest request body; larger is answered 413 (default 8 MiB)");
  sub->add_option("--request-timeout", f.request_timeout,
                  "Seconds a client may take to send one request (default 30)")
      ->check(CLI::Range(0.1, 3600.0));
  sub->callback([] { run_serve(f); });
}

}  // namespace
STRATA_COMMAND(setup);
}  // namespace strata::cli
