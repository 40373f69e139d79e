// `strata run-batch -i FILE -o FILE`, as vLLM's run_batch: an OpenAI batch file (one JSON object
// a line: custom_id, method, url of /v1/completions or /v1/chat/completions, body) run together
// through the engine (LLMEngine directly, continuous batching), one output line per input line
// in input order, as the OpenAI Batch API writes them:
//   {"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}
// A request that cannot run gets status_code 400 and its message in "error".
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "core/check.h"
#include "core/log.h"
#include "serve_setup.h"
#include "server/openai_errors.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"

namespace strata::cli {
namespace {

using nlohmann::ordered_json;

struct RunBatchFlags {
  ServingFlags serving;
  std::string input, output;
};

struct Line {
  std::string custom_id;
  std::optional<server::ResponseBuilder> builder;
  std::string request_id;
  size_t pending = 0;  // engine requests not finished
  std::optional<ordered_json> body;  // 200 body
  std::optional<server::ApiError> error;
};

ordered_json output_line(const Line& l) {
  ordered_json o;
  o["id"] = server::random_id("batch_req_");
  o["custom_id"] = l.custom_id;
  if (l.body) {
    o["response"] = {{"status_code", 200}, {"request_id", l.request_id}, {"body", *l.body}};
    o["error"] = nullptr;
  } else {
    const server::ApiError e = l.error ? *l.error : server::internal_error("no answer");
    o["response"] = {{"status_code", e.status}, {"request_id", l.request_id}, {"body", e.body()}};
    o["error"] = {{"code", e.type}, {"message", e.message}};
  }
  return o;
}

void run_batch(const RunBatchFlags& f) {
  std::ifstream in(f.input);
  if (!in) fail("run-batch: cannot read {}", f.input);
  std::ofstream out(f.output);
  if (!out) fail("run-batch: cannot write {}", f.output);

  auto served = build_serving(
      f.serving, "run-batch",
      [](const std::string& what, const std::function<void()>& load) {
        log::info("run-batch: loading {}", what);
        load();
      },
      /*async=*/false);
  engine::LLMEngine& llm = *served->llm;
  const server::ServingContext& ctx = served->ctx;

  std::vector<Line> lines;
  std::map<std::string, size_t> by_request;  // engine request id -> line
  std::string text;
  size_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Line l;
    auto parsed_line = server::parse_json_body(text);
    if (const auto* e = std::get_if<server::ApiError>(&parsed_line)) {
      l.error = *e;
      l.error->message = fmt::format("line {}: {}", line_no, e->message);
      lines.push_back(std::move(l));
      continue;
    }
    const ordered_json& j = std::get<ordered_json>(parsed_line);
    if (j.contains("custom_id") && j["custom_id"].is_string()) l.custom_id = j["custom_id"];
    const std::string method = j.value("method", "POST");
    const std::string url = j.value("url", "");
    if (method != "POST" || (url != "/v1/completions" && url != "/v1/chat/completions") ||
        !j.contains("body") || !j["body"].is_object()) {
      l.error = server::bad_request(fmt::format(
          "line {}: needs method POST, url /v1/completions or /v1/chat/completions and a body",
          line_no));
      lines.push_back(std::move(l));
      continue;
    }
    if (j["body"].value("stream", false)) {
      l.error = server::bad_request("streaming is not supported in a batch", "stream");
      lines.push_back(std::move(l));
      continue;
    }
    const std::string body = j["body"].dump();
    server::ParseResult r = url == "/v1/completions" ? server::parse_completion_request(body, ctx)
                                                     : server::parse_chat_request(body, ctx);
    if (const auto* e = std::get_if<server::ApiError>(&r)) {
      l.error = *e;
      lines.push_back(std::move(l));
      continue;
    }
    auto& p = std::get<server::ParsedRequest>(r);
    l.request_id = p.plan.id;
    l.builder.emplace(p.plan, ctx);
    const size_t index = lines.size();
    try {
      for (auto& req : p.requests) {
        const std::string id = req.id;
        if (!llm.add_request(std::move(req)))
          fail("the waiting queue is full (raise --max-num-queued-requests)");
        by_request[id] = index;
        l.pending++;
      }
    } catch (const Error& e) {
      for (const auto& [id, i] : by_request)
        if (i == index) llm.abort_request(id);
      l.error = server::bad_request(e.what());
    }
    lines.push_back(std::move(l));
  }
  log::info("run-batch: {} requests from {}", lines.size(), f.input);

  size_t done = 0, total = 0;
  for (const auto& l : lines) total += l.pending > 0;
  while (llm.has_unfinished()) {
    for (const auto& out : llm.step()) {
      auto it = by_request.find(out.request_id);
      if (it == by_request.end()) continue;
      Line& l = lines[it->second];
      if (l.error) continue;  // a sibling failed at add time; its aborts still arrive
      l.builder->on_output(out);
      if (out.finished) l.pending--;
      if (l.builder->error()) {
        l.error = *l.builder->error();
      } else if (l.pending == 0 && l.builder->finished()) {
        l.body = l.builder->body();
        if (++done % 100 == 0) log::info("run-batch: {}/{} done", done, total);
      }
    }
  }
  size_t failed = 0;
  for (const auto& l : lines) {
    failed += !l.body;
    out << output_line(l).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  log::info("run-batch: wrote {} lines to {} ({} failed)", lines.size(), f.output, failed);
}

void setup(CLI::App& app) {
  auto* sub = app.add_subcommand("run-batch", "Run an OpenAI batch file through the engine");
  static RunBatchFlags f;
  sub->add_option("-i,--input-file", f.input, "Batch input (JSONL)")->required();
  sub->add_option("-o,--output-file", f.output, "Batch output (JSONL)")->required();
  add_serving_flags(sub, f.serving);
  sub->callback([] { run_batch(f); });
}

}  // namespace
STRATA_COMMAND(setup);
}  // namespace strata::cli
