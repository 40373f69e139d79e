// Activation calibration for `strata quantize --format fp8`: the host forward runs over a few
// built-in token sequences while an op observer (OpContext::observer) records, per linear
// module, the largest |x| of its input (ModelOpt's max calibration). Linears are recognized by
// their weight tensor (the loaded host views); the routed experts, which run inside one
// moe_experts op, by their expert list: each expert's up_proj input is the rows routed to it,
// its down_proj input relu²(up_proj(x)) rounded as the forward stores it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/nemotron_h/model.h"

namespace strata::model {

// The calibration prompts: `count` sequences of `length` ids spread over the vocabulary
// (deterministic; no tokenizer needed).
std::vector<std::vector<int32_t>> calibration_prompts(int64_t vocab, int64_t count, int64_t length);

// Module name (checkpoint name without ".weight") -> input amax over every calibration token
// that reached it. Runs on the host.
std::map<std::string, float> calibrate_input_amax(NemotronHModel& m,
                                                  const std::vector<std::vector<int32_t>>& prompts);

}  // namespace strata::model
