// Loading a model directory for a run: config.json, the checkpoint's tensors, validation, the
// kernel check for the run's device, and the upload of the weights to it.
#pragma once

#include <memory>
#include <string>

#include "model/nemotron_h/model.h"

namespace strata::model {

// Throws strata::Error naming the directory, file or tensor at fault. `sampling`: the run also
// samples (the sample op must exist on `device`).
std::unique_ptr<NemotronHModel> load_model(const std::string& dir, Device device, bool sampling = true);

// Parameters the config implies (tensors of spec 2.1; a tied lm_head counted once).
int64_t parameter_count(const ModelConfig& c);

}  // namespace strata::model
