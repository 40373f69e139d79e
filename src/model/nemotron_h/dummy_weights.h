// `--load-format dummy` (vLLM's name): the weights of synthetic_plan.h built for a run without
// any file. On a device run every matrix (>= 64K elements) is generated directly in device
// memory by the counter-based generator (no host copy, no upload); the small vectors (norms,
// dt_bias, A_log, D, biases, FP8 scales) are made on the host and follow through the residency
// upload. The values equal what `strata make-checkpoint` writes with the same options.
#pragma once

#include "model/nemotron_h/config.h"
#include "model/nemotron_h/load_report.h"
#include "model/nemotron_h/synthetic.h"
#include "model/nemotron_h/weights.h"

namespace strata::model {

// `stream` is the device stream for device == Cuda (ignored on the host). Fills the report's
// host/device byte counts.
ModelWeights load_dummy_weights(const ModelConfig& c, const SyntheticOptions& o, Device device,
                                void* stream, LoadReport* report);

}  // namespace strata::model
