// strata as a LocalAI backend: LocalAI's gRPC `backend.Backend` service (localai_backend.proto)
// over gRPC++. Health answers "OK" before any model is loaded; LoadModel maps LocalAI's
// ModelOptions onto strata's serving flags (through the loader the command provides); Predict
// and PredictStream map PredictOptions onto an OpenAI request (chat when UseTokenizerTemplate
// with Messages, else a completion of Prompt) and run it through the same protocol layer and
// engine as `strata serve`; TokenizeString, Status and Free.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "localai_backend.grpc.pb.h"
#include "server/openai_protocol.h"
#include "server/server_engine.h"

namespace strata::server {

// A loaded model as the backend sees it; `owner` keeps everything alive (dropping it frees the
// engine and the weights).
struct LocalAIModel {
  const ServingContext* ctx = nullptr;
  EngineClient* engine = nullptr;
  std::shared_ptr<void> owner;
};
// Throws strata::Error naming the problem (answered as LoadModel's Result message).
using LocalAILoader = std::function<LocalAIModel(const backend::ModelOptions&)>;

// PredictOptions -> the OpenAI request body it means; *chat tells which endpoint.
nlohmann::ordered_json localai_request_body(const backend::PredictOptions& p, bool* chat);

class LocalAIBackend {
 public:
  explicit LocalAIBackend(LocalAILoader loader);
  ~LocalAIBackend();
  // Binds (HOST:PORT; port 0 picks one) and starts serving; throws strata::Error.
  void start(const std::string& addr);
  int port() const;
  // Blocks until shutdown() (from another thread or a signal handler's thread).
  void wait();
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
