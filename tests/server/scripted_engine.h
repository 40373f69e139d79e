// A small engine for the server tests: its own thread, a waiting queue and a running batch,
// one token per running completion per step, abort within one step, stats with the same
// meaning as the real engine's (running, waiting, "KV usage" = live requests / capacity), so
// the transport can be tested without a model. Outputs are deterministic functions of the
// prompt (or a scripted text, to drive the reasoning and tool-call parsers).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/server_engine.h"

namespace strata::text {
class Tokenizer;
}

namespace strata::server::testing {

struct ScriptedEngineOptions {
  std::chrono::microseconds step_interval{500};
  int64_t max_running = 64;
  int64_t max_waiting = 0;  // 0: unbounded
  // A full queue answered as engine::AsyncEngine does it: submit() accepts, and the engine
  // thread sends a finished output carrying the error (instead of submit() returning false).
  bool refuse_with_output = false;
  int32_t vocab_size = 4096;
  int32_t eos_id = 2;
  const text::Tokenizer* tokenizer = nullptr;  // renders ids as text when set
  // Non-empty (needs the tokenizer): every completion is this text's ids, then EOS.
  std::string script;
};

class ScriptedEngine final : public EngineClient {
 public:
  explicit ScriptedEngine(ScriptedEngineOptions options);
  ~ScriptedEngine() override;

  bool submit(engine::EngineRequest request, OutputSink sink) override;
  void abort(const std::string& request_id) override;
  engine::EngineStats stats() const override;
  void shutdown(bool drain) override;

  // The ids completion `index` of a prompt produces when nothing stops it.
  std::vector<int32_t> expected_ids(const std::vector<int32_t>& prompt, int32_t index,
                                    int64_t count) const;
  int64_t live_requests() const;  // queued + running (the leak check)
  int64_t aborted() const;

 private:
  struct Live;
  void loop();
  void step(std::vector<std::pair<OutputSink, engine::RequestOutput>>& out);
  int32_t token(const std::vector<int32_t>& prompt, int32_t index, int64_t k) const;

  ScriptedEngineOptions options_;
  std::vector<int32_t> script_ids_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Live>> waiting_;
  std::vector<std::shared_ptr<Live>> running_;
  std::vector<std::string> aborts_;
  std::vector<std::pair<OutputSink, engine::RequestOutput>> refusals_;
  bool stop_ = false, drain_ = false;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, steps_ = 0, aborted_ = 0;
  std::thread thread_;
};

}  // namespace strata::server::testing
