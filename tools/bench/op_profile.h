// Where a step's time goes (`strata bench --profile-ops`, `bench --batch ... --profile-ops`,
// `bench prefill --profile-ops`): the step is run eagerly with a CUDA event recorded before
// every op, behind a spinning kernel that holds the stream until the host has enqueued the whole
// step, so the kernels run back to back as in the CUDA graph and each interval is one op's
// device time (its kernels plus the gaps between them). The sum over ops approximates the graph
// step (minus the graph's own launch savings).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/nemotron_h/model.h"

namespace strata::bench {

struct OpProfileRow {
  std::string op;    // op name; linears and experts with their weight dtype and shape
  double calls = 0;  // per step
  double us = 0;     // device microseconds per step (mean over the profiled steps)
};

struct OpProfile {
  int64_t steps = 0;
  double step_us = 0;              // sum of the rows
  std::vector<OpProfileRow> rows;  // most expensive first
};

// The row an op call is counted under: its name; linears and experts with their weight dtype
// and shape (and the linear's M).
std::string op_profile_key(const char* op, const void* args);

// Profiles steps run on one op context (CUDA): step() runs one step's ops with an event before
// each, behind a spin of `spin_us` (long enough for the host to enqueue the whole step); the
// step's input must already be on the device (its h2d copy done before the spin starts).
class OpProfiler {
 public:
  OpProfiler(OpContext& ctx, double spin_us) : ctx_(ctx), spin_us_(spin_us) {}
  void step(const std::function<void()>& run_ops);
  OpProfile result() const;  // means per step, most expensive first

 private:
  OpContext& ctx_;
  double spin_us_;
  int64_t steps_ = 0;
  std::map<std::string, OpProfileRow> rows_;
};

// The profile as a markdown table (op, calls/step, us/step, us/call, share of the step).
std::string op_profile_table(const OpProfile& p);

// Prefills `prompt_len` tokens, runs `warmup` decode steps, then profiles `steps` steps.
// CUDA only.
OpProfile profile_decode_ops(model::NemotronHModel& m, int64_t prompt_len, int64_t warmup,
                             int64_t steps);

}  // namespace strata::bench
