#include "server/localai_backend.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <shared_mutex>

#include "core/check.h"
#include "core/log.h"
#include "text/tokenizer.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;

// Outputs of one call's engine requests, handed from the engine thread to the gRPC thread.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<engine::RequestOutput> outputs;
};

grpc::Status invalid(const std::string& m) { return {grpc::StatusCode::INVALID_ARGUMENT, m}; }

}  // namespace

nlohmann::ordered_json localai_request_body(const backend::PredictOptions& p, bool* chat) {
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  *chat = p.usetokenizertemplate() && p.messages_size() > 0;
  if (*chat) {
    auto& msgs = b["messages"] = nlohmann::ordered_json::array();
    for (const auto& m : p.messages()) {
      nlohmann::ordered_json j = {{"role", m.role()}, {"content", m.content()}};
      if (!m.name().empty()) j["name"] = m.name();
      if (!m.tool_call_id().empty()) j["tool_call_id"] = m.tool_call_id();
      if (!m.reasoning_content().empty()) j["reasoning_content"] = m.reasoning_content();
      if (!m.tool_calls().empty()) {
        auto calls = nlohmann::ordered_json::parse(m.tool_calls(), nullptr, false);
        if (!calls.is_discarded()) j["tool_calls"] = calls;
      }
      msgs.push_back(std::move(j));
    }
    if (!p.tools().empty()) {
      auto tools = nlohmann::ordered_json::parse(p.tools(), nullptr, false);
      if (!tools.is_discarded() && tools.is_array() && !tools.empty()) b["tools"] = tools;
    }
    if (!p.toolchoice().empty() && b.contains("tools")) {
      auto choice = nlohmann::ordered_json::parse(p.toolchoice(), nullptr, false);
      b["tool_choice"] = choice.is_discarded() ? nlohmann::ordered_json(p.toolchoice()) : choice;
    }
    if (p.tokens() > 0) b["max_completion_tokens"] = p.tokens();
    if (p.logprobs() > 0 || p.toplogprobs() > 0) {
      b["logprobs"] = true;
      b["top_logprobs"] = std::max(p.logprobs(), p.toplogprobs());
    }
  } else {
    b["prompt"] = p.prompt();
    // LocalAI leaves Tokens 0 for "no limit": the rest of the context (chat's default).
    if (p.tokens() > 0) b["max_tokens"] = p.tokens();
    if (p.logprobs() > 0) b["logprobs"] = p.logprobs();
  }
  b["temperature"] = p.temperature();
  if (p.topp() > 0) b["top_p"] = p.topp();
  if (p.topk() > 0) b["top_k"] = p.topk();
  if (p.seed() != 0) b["seed"] = p.seed();
  if (p.penalty() > 0) b["repetition_penalty"] = p.penalty();
  if (p.frequencypenalty() != 0) b["frequency_penalty"] = p.frequencypenalty();
  if (p.presencepenalty() != 0) b["presence_penalty"] = p.presencepenalty();
  if (p.ignoreeos()) b["ignore_eos"] = true;
  if (p.stopprompts_size() > 0) {
    auto& stop = b["stop"] = nlohmann::ordered_json::array();
    for (const auto& s : p.stopprompts())
      if (!s.empty()) stop.push_back(s);
  }
  if (!p.logitbias().empty()) {
    auto bias = nlohmann::ordered_json::parse(p.logitbias(), nullptr, false);
    if (!bias.is_discarded()) b["logit_bias"] = bias;
  }
  if (!p.correlationid().empty()) b["request_id"] = p.correlationid();
  return b;
}

class LocalAIService final : public backend::Backend::Service {
 public:
  explicit LocalAIService(LocalAILoader loader) : loader_(std::move(loader)) {}

  grpc::Status Health(grpc::ServerContext*, const backend::HealthMessage*,
                      backend::Reply* reply) override {
    reply->set_message("OK");
    return grpc::Status::OK;
  }

  grpc::Status LoadModel(grpc::ServerContext*, const backend::ModelOptions* options,
                         backend::Result* result) override {
    std::unique_lock lock(mu_);
    model_ = {};  // a second LoadModel replaces the first
    try {
      model_ = loader_(*options);
      result->set_success(true);
      result->set_message("loaded " + model_.ctx->served_model_name);
    } catch (const std::exception& e) {
      model_ = {};
      result->set_success(false);
      result->set_message(e.what());
    }
    return grpc::Status::OK;
  }

  grpc::Status Free(grpc::ServerContext*, const backend::HealthMessage*,
                    backend::Result* result) override {
    std::unique_lock lock(mu_);  // waits for running predictions
    const bool had = model_.owner != nullptr;
    model_ = {};
    result->set_success(true);
    result->set_message(had ? "freed" : "no model loaded");
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const backend::HealthMessage*,
                      backend::StatusResponse* status) override {
    std::shared_lock lock(mu_);
    status->set_state(model_.engine ? backend::StatusResponse::READY
                                    : backend::StatusResponse::UNINITIALIZED);
    return grpc::Status::OK;
  }

  grpc::Status TokenizeString(grpc::ServerContext*, const backend::PredictOptions* p,
                              backend::TokenizationResponse* out) override {
    std::shared_lock lock(mu_);
    if (!model_.ctx) return {grpc::StatusCode::FAILED_PRECONDITION, "no model loaded"};
    if (!model_.ctx->tokenizer)
      return {grpc::StatusCode::FAILED_PRECONDITION, "the model is served without a tokenizer"};
    const auto ids = model_.ctx->tokenizer->encode(p->prompt(), /*add_special_tokens=*/true);
    for (int32_t id : ids) out->add_tokens(id);
    out->set_length(static_cast<int32_t>(ids.size()));
    return grpc::Status::OK;
  }

  grpc::Status Predict(grpc::ServerContext* context, const backend::PredictOptions* p,
                       backend::Reply* reply) override {
    return run(context, *p, [&](const backend::Reply& r) {
      reply->set_message(reply->message() + r.message());
      reply->set_tokens(r.tokens());
      reply->set_prompt_tokens(r.prompt_tokens());
      reply->set_timing_prompt_processing(r.timing_prompt_processing());
      reply->set_timing_token_generation(r.timing_token_generation());
      return true;
    });
  }

  grpc::Status PredictStream(grpc::ServerContext* context, const backend::PredictOptions* p,
                             grpc::ServerWriter<backend::Reply>* writer) override {
    return run(context, *p, [&](const backend::Reply& r) { return writer->Write(r); });
  }

 private:
  // Runs one prediction; `emit` gets each piece (text since the last, cumulative counts) and
  // returns false when the client is gone.
  grpc::Status run(grpc::ServerContext* context, const backend::PredictOptions& p,
                   const std::function<bool(const backend::Reply&)>& emit) {
    std::shared_lock lock(mu_);
    if (!model_.engine) return {grpc::StatusCode::FAILED_PRECONDITION, "no model loaded"};
    bool chat = false;
    const std::string body = localai_request_body(p, &chat).dump();
    ParseResult parsed = chat ? parse_chat_request(body, *model_.ctx)
                              : parse_completion_request(body, *model_.ctx);
    if (const auto* e = std::get_if<ApiError>(&parsed)) return invalid(e->message);
    auto& req = std::get<ParsedRequest>(parsed);
    if (req.requests.size() != 1) return invalid("one prompt per request");
    const std::string id = req.requests[0].id;
    const auto t0 = Clock::now();
    auto channel = std::make_shared<Channel>();
    try {
      const bool queued = model_.engine->submit(std::move(req.requests[0]),
                                                [channel](engine::RequestOutput out) {
                                                  std::lock_guard l(channel->mu);
                                                  channel->outputs.push_back(std::move(out));
                                                  channel->cv.notify_all();
                                                });
      if (!queued) return {grpc::StatusCode::RESOURCE_EXHAUSTED, "the waiting queue is full"};
    } catch (const Error& e) {
      return invalid(e.what());
    }
    int64_t tokens = 0;
    double first_token_ms = -1;
    bool aborted = false;
    for (;;) {
      std::deque<engine::RequestOutput> batch;
      {
        std::unique_lock l(channel->mu);
        channel->cv.wait_for(l, std::chrono::milliseconds(50),
                             [&] { return !channel->outputs.empty(); });
        batch.swap(channel->outputs);
      }
      if (!aborted && context->IsCancelled()) {
        model_.engine->abort(id);  // the final (abort) output still arrives
        aborted = true;
      }
      for (const auto& out : batch) {
        backend::Reply r;
        std::string text;
        for (const auto& c : out.completions) {
          tokens += static_cast<int64_t>(c.token_ids.size());
          text += c.text;
        }
        if (tokens > 0 && first_token_ms < 0)
          first_token_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (out.finished && !out.error.empty())
          return {grpc::StatusCode::INTERNAL, out.error};
        r.set_message(text);
        r.set_tokens(static_cast<int32_t>(tokens));
        r.set_prompt_tokens(static_cast<int32_t>(out.prompt_tokens));
        r.set_timing_prompt_processing(std::max(0.0, first_token_ms));
        r.set_timing_token_generation(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count() -
            std::max(0.0, first_token_ms));
        if ((!text.empty() || out.finished) && !aborted && !emit(r)) {
          model_.engine->abort(id);
          aborted = true;
        }
        if (out.finished)
          return aborted ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                         : grpc::Status::OK;
      }
    }
  }

  LocalAILoader loader_;
  std::shared_mutex mu_;
  LocalAIModel model_;
};

struct LocalAIBackend::Impl {
  LocalAIService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag shut;
  explicit Impl(LocalAILoader loader) : service(std::move(loader)) {}
};

LocalAIBackend::LocalAIBackend(LocalAILoader loader)
    : impl_(std::make_unique<Impl>(std::move(loader))) {}

LocalAIBackend::~LocalAIBackend() { shutdown(); }

void LocalAIBackend::start(const std::string& addr) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(addr, grpc::InsecureServerCredentials(), &impl_->port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) fail("localai: cannot listen on {}", addr);
}

int LocalAIBackend::port() const { return impl_->port; }

void LocalAIBackend::wait() {
  if (impl_->server) impl_->server->Wait();
}

void LocalAIBackend::shutdown() {
  if (!impl_->server) return;
  std::call_once(impl_->shut, [this] {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
}

}  // namespace strata::server
