// What a caller hands the engine (a request: prompt ids + sampling parameters) and what it
// gets back (a stream of RequestOutput, one per step in which the request produced something).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace strata::engine {

enum class FinishReason { None, Stop, Length, Abort, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error", null

struct EngineRequest {
  std::string id;                 // unique among live requests
  std::vector<int32_t> prompt;    // token ids, >= 1
  SamplingParams params;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

// One token's log-probabilities (logprobs >= 0 in the request).
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.f;
  int32_t rank = 0;  // 1 = most likely
  std::vector<std::pair<int32_t, float>> top;  // the top `logprobs` (id, logprob), best first
};

// What one completion (index < n) of a request produced since the last output.
struct CompletionDelta {
  int32_t index = 0;
  std::vector<int32_t> token_ids;  // new ids (all of them, stop id included)
  std::string text;                // new final text (stop strings and held-back text excluded)
  std::vector<TokenLogprobs> logprobs;  // one per new id, when requested
  FinishReason finish = FinishReason::None;
  std::string stop_reason;  // the stop string, or the stop id as text, that ended it
  std::optional<int32_t> stop_token_id;  // set when a stop id (not EOS) ended it: the JSON
                                         // stop_reason is then that integer (vLLM)
  int64_t num_generated = 0;  // tokens so far
};

struct RequestOutput {
  std::string request_id;
  std::vector<CompletionDelta> completions;  // those that changed this step
  bool finished = false;                     // every completion has finished
  int64_t prompt_tokens = 0;
  std::string error;  // FinishReason::Error: why (for example non-finite logits at a position)
  // Timing for metrics (seconds since arrival): first scheduled, first token.
  double queue_seconds = 0, first_token_seconds = -1;
};

}  // namespace strata::engine
