// The Nemotron-H forward (spec section 3), written once over ops::run: the same code runs on
// the host reference kernels and on a device backend, chosen by the OpContext.
//
// One step = any mix of sequences, each adding q_len >= 1 tokens after what its caches already
// hold (StepInput): a whole prompt, a prefill chunk continuing from cached state ("chunked
// prefill is prefill with an initial state"), or one decode token. Steps where every sequence
// adds exactly one token to existing state use the decode kernels (conv1d_update, ssm_update);
// all others use the prefill kernels, which also handle q_len 1.
#pragma once

#include "cache/cache_plan.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/load_report.h"
#include "model/nemotron_h/residency.h"
#include "engine/step_input.h"
#include "model/nemotron_h/weights.h"
#include "ops/ops.h"

namespace strata::model {

class NemotronHModel {
 public:
  NemotronHModel(ModelConfig config, ModelWeights weights);

  const ModelConfig& config() const { return config_; }
  // The weights as loaded (views of the checkpoint, or dummy weights where they were made).
  ModelWeights& weights() { return weights_.loaded(); }
  // The weights a run on `device` uses: copied there on the first use (residency.h).
  const ModelWeights& weights_on(Device device) { return weights_.on(device); }
  WeightResidency& residency() { return weights_; }
  DType act_dtype() const { return weights_.loaded().act_dtype; }
  LoadReport& load_report() { return load_report_; }

  // Runs one step, updating `cache` (Mamba states of the step's slots, KV rows of its
  // positions). Returns f32 logits on ctx.device.
  Tensor forward(OpContext& ctx, const engine::StepInput& step, cache::ModelCache& cache,
                 engine::LogitRows rows);

  // Throws naming every op the model needs that `device` has no kernel for (a load-time check:
  // nothing falls back silently). `sampling`: the run also samples tokens. Ops the user forces
  // onto the host (ops::forced_host_ops) need only their host kernel.
  void check_kernels(Device device, bool sampling = true) const;

 private:
  ModelConfig config_;
  WeightResidency weights_;
  LoadReport load_report_;
};

}  // namespace strata::model
