// What loading a model needs, for the admission check (core/admission.h) that runs before any
// weight is read or generated.
#pragma once

#include <cstdint>
#include <string>

#include "core/admission.h"
#include "model/nemotron_h/load.h"

namespace strata::model {

// parameter_count() in double: it cannot overflow for any config that parses (widths are
// bounded at 2^24 each, but their products over many layers are not bounded by int64).
double parameter_count_f64(const ModelConfig& c);

// Bytes of the *.safetensors files in `dir` (0 when there are none or it cannot be read).
uint64_t safetensors_bytes_in(const std::string& dir);

// Lower bound of what load_model(o) allocates for `config`'s weights: dummy weights are
// generated where they live (params x element size, 1 byte for the FP8 layout); checkpoint
// files are mapped (address space) and, on a device, uploaded (device bytes).
ResourceNeed weights_need(const ModelConfig& config, const LoadOptions& o);

// check_fits(weights_need(...)), naming the model.
void admit_weights(const ModelConfig& config, const LoadOptions& o);

}  // namespace strata::model
