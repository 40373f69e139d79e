// What the server needs from an engine: submit a request with a sink for its outputs, abort
// it, read the engine's gauges, shut down. engine::AsyncEngine is adapted to it
// (make_async_engine_client); tests drive the transport with a small scripted engine.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/request.h"

namespace strata::server {

class EngineClient {
 public:
  using OutputSink = std::function<void(engine::RequestOutput)>;
  virtual ~EngineClient() = default;

  // Queues a request. Throws strata::Error for a request the engine refuses (the client's
  // 400); returns false when the waiting queue is full (503). The sink runs on the engine
  // thread, must not block, and its last call has finished = true.
  virtual bool submit(engine::EngineRequest request, OutputSink sink) = 0;
  // Ends the request within one engine step; the sink then gets a finished output (Abort).
  virtual void abort(const std::string& request_id) = 0;
  virtual engine::EngineStats stats() const = 0;
  // Finishes (drain) or aborts in-flight requests, then stops; sinks are not called after.
  virtual void shutdown(bool drain) = 0;
};

// Adapts an AsyncEngine (owned).
std::unique_ptr<EngineClient> make_async_engine_client(std::unique_ptr<engine::AsyncEngine> e);

}  // namespace strata::server
