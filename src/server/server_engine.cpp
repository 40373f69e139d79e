#include "server/server_engine.h"

namespace strata::server {

namespace {

class AsyncEngineClient final : public EngineClient {
 public:
  explicit AsyncEngineClient(std::unique_ptr<engine::AsyncEngine> e) : e_(std::move(e)) {}
  bool submit(engine::EngineRequest request, OutputSink sink) override {
    return e_->submit(std::move(request), std::move(sink));
  }
  void abort(const std::string& request_id) override { e_->abort(request_id); }
  engine::EngineStats stats() const override { return e_->stats(); }
  void shutdown(bool drain) override { e_->shutdown(drain); }

 private:
  std::unique_ptr<engine::AsyncEngine> e_;
};

}  // namespace

std::unique_ptr<EngineClient> make_async_engine_client(std::unique_ptr<engine::AsyncEngine> e) {
  return std::make_unique<AsyncEngineClient>(std::move(e));
}

}  // namespace strata::server
