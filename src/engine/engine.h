// The engine loop: one Scheduler + one Executor + one OutputProcessor. LLMEngine is the
// synchronous core (add / abort / step), used by `strata generate --prompts-file`, the offline
// benchmarks and the tests; AsyncEngine runs it on its own thread, fed through a queue and
// answering through per-request channels (the server: HTTP threads never step the engine, the
// engine thread never handles HTTP).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/executor.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"

namespace strata::engine {

struct EngineConfig {
  ExecutorConfig executor;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_waiting = 0;  // 0: unbounded
  std::vector<int32_t> eos_ids;  // the model's EOS ids
};

struct EngineStats {
  int64_t running = 0, waiting = 0;
  double kv_usage = 0, mamba_usage = 0;  // fraction of blocks / slots in use
  int64_t prompt_tokens = 0, generation_tokens = 0, preemptions = 0, steps = 0;
};

class LLMEngine {
 public:
  // `tokenizer` may be null (ids only).
  LLMEngine(model::NemotronHModel& model, const text::Tokenizer* tokenizer,
            const EngineConfig& config);
  ~LLMEngine();

  // Validates (prompt ids, lengths against max_model_len, parameters) and queues. Throws
  // strata::Error naming the problem; returns false when the waiting queue is full.
  bool add_request(EngineRequest request);
  // The checks add_request makes, without queueing (thread-safe: reads only the model and the
  // executor's limits).
  void validate(const EngineRequest& request) const;
  int64_t max_model_len() const;
  int64_t max_waiting() const;  // 0: unbounded
  void abort_request(const std::string& request_id);
  // Runs one step; returns the outputs it produced (empty when idle).
  std::vector<RequestOutput> step();
  bool has_unfinished() const;
  EngineStats stats() const;
  Executor& executor() { return *executor_; }
  const Scheduler& scheduler() const { return *scheduler_; }

 private:
  // Launches one planned step (state copies, chunks, sampling rows) and advances the plan.
  void launch(const StepPlan& plan);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Scheduler> scheduler_;
};

// Thread-safe front of an LLMEngine running on its own thread.
class AsyncEngine {
 public:
  // Called on the engine thread with each output of the request; must not block (hand the
  // output to the I/O side, e.g. post it to an asio strand). The last call has finished=true.
  using OutputSink = std::function<void(RequestOutput)>;

  explicit AsyncEngine(std::unique_ptr<LLMEngine> engine);
  ~AsyncEngine();  // stops the thread; unfinished requests are aborted

  // Queues a request; validation errors are thrown here, on the caller's thread (they are the
  // client's 400s). Returns false when the waiting queue is full (503).
  bool submit(EngineRequest request, OutputSink sink);
  // Aborts within one engine step; the sink gets a finished output with FinishReason::Abort.
  void abort(const std::string& request_id);
  // Finishes in-flight requests (drain) or aborts them, then stops the thread.
  void shutdown(bool drain);
  EngineStats stats() const;
  int64_t max_model_len() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::engine
