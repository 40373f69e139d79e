// Batch-1 decode benchmark (`strata bench`): prefill a short prompt, then time N decode steps
// (the step input uploaded, the forward, the greedy sample and its id read back: what one
// generated token costs), median over repeats; eagerly and, when the step can be captured,
// through a CUDA graph. Reports tokens/s against the bytes one token must read (weights
// touched + recurrent state read and written + KV cache read), as a fraction of the H200's
// measured 4.57 TB/s read ceiling (spec/performance.md section 9).
#pragma once

#include "engine/executor.h"

#include <cstdint>
#include <string>
#include <vector>

#include "model/nemotron_h/model.h"

namespace strata::bench {

// An executor for a benchmark: `seqs` sequences of at most `tokens` tokens, caches sized for
// exactly that (16-token blocks), decode graphs when `graphs` (CUDA).
engine::ExecutorConfig bench_executor(model::NemotronHModel& m, Device device, int64_t seqs,
                                      int64_t tokens, bool graphs);
// The median of a sample (the upper middle for an even count; 0 for none).
double median(std::vector<double> v);

struct DecodeBytes {
  double weights = 0;  // bytes of weights one decode token reads
  double state = 0;    // Mamba conv + SSM state, read and written
  double kv = 0;       // KV cache read (at the mean context of the timed steps) and written
  double total() const { return weights + state + kv; }
};

// Bytes one decode token touches at context length `context` (see the header).
DecodeBytes decode_bytes_per_token(const model::ModelConfig& c, const model::ModelWeights& w,
                                   double context);

struct BenchOptions {
  int64_t prompt_len = 16;
  int64_t steps = 64;
  int64_t repeats = 5;
  int64_t warmup = 4;
  bool graph = true;
  double ceiling_bytes_per_s = 4.57e12;
};

struct BenchRow {
  std::string mode;         // "eager" or "graph"
  double ms_per_token = 0;  // median over repeats
  double tokens_per_s = 0;
  double fraction = 0;            // bytes/token * tokens/s over the ceiling
  std::vector<double> repeat_ms;  // per repeat, ms per token
  std::string note;               // why a mode did not run
};

struct BenchResult {
  DecodeBytes bytes;
  std::vector<BenchRow> rows;
  std::vector<int32_t> tokens_eager, tokens_graph;  // greedy ids of the first repeat of each mode
};

BenchResult run_decode_bench(model::NemotronHModel& m, Device device, const BenchOptions& o);

}  // namespace strata::bench
