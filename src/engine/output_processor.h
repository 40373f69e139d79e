// Output processing in the library (not the CLI): per completion, incremental detokenization,
// stop handling (EOS / stop ids unless ignore_eos, stop strings matched across token
// boundaries and held back from the stream until resolved, min_tokens, max_tokens) and finish
// reasons, producing the CompletionDelta stream the engine returns. Host only; one instance
// per engine, driven by the engine thread.
//
// vLLM's rules (v1 check_stop and the detokenizer's stop-string check): no stop before
// min_tokens tokens (stop ids are masked until then; stop strings are looked for once more than
// min_tokens tokens exist); EOS first (stop_reason null), then the request's stop ids
// (stop_reason = the id, CompletionDelta::stop_token_id), then stop strings on the final text
// (stop_reason = the string), then max_tokens ("length"). A stop id's own text and a matched stop
// string are left out of the text unless include_stop_str_in_output, and text after a matched
// stop string is dropped. While a completion's text ends with what could be the start of a stop
// string, that tail is held back (only that tail, not vLLM's fixed longest-stop-minus-one
// window). When several stop strings match in the same token, the earliest in the text wins
// (vLLM takes the first in list order). Without a tokenizer or with detokenize off, only ids.
// finish_reason_name (engine/request.h) is defined in output_processor.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"

namespace strata::text {
class Tokenizer;
}

namespace strata::engine {

class OutputProcessor {
 public:
  // `tokenizer` may be null (--skip-tokenizer-init: ids only; stop strings are refused at
  // add()). `eos_ids`: the model's end-of-sequence ids (generation_config / tokenizer).
  OutputProcessor(const text::Tokenizer* tokenizer, std::vector<int32_t> eos_ids);
  ~OutputProcessor();

  // Registers a request's n completions. Throws strata::Error for parameters this processor
  // cannot honour (stop strings without a tokenizer).
  void add(const EngineRequest& request);
  // One new token of completion `index`: appends it to `delta` (ids, final text, logprobs)
  // and returns the finish reason it caused (None: keep going). On a finish the held-back text
  // is flushed into delta (without a matched stop string unless include_stop_str_in_output).
  FinishReason on_token(const std::string& request_id, int32_t index, int32_t id,
                        const TokenLogprobs* logprobs, CompletionDelta* delta);
  // Ends a completion from outside (abort, error): flushes held-back text into delta.
  void finish(const std::string& request_id, int32_t index, FinishReason reason,
              CompletionDelta* delta);
  // Forgets a request (all completions finished or aborted).
  void remove(const std::string& request_id);
  // Stop ids a completion must not produce yet (min_tokens not reached): the engine masks them.
  std::vector<int32_t> masked_stop_ids(const std::string& request_id, int32_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::engine
