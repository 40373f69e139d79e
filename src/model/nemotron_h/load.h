// Loading a model for a run: its configuration, the weights (a checkpoint directory, or dummy
// weights of a preset / config.json), the quantization metadata, the kernel check for the run's
// device, the weights' residency on it, and the load report (load_report.h).
#pragma once

#include <memory>
#include <string>

#include "model/nemotron_h/model.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::model {

enum class LoadFormat { Safetensors, Dummy };

struct LoadOptions {
  Device device = Device::Host;
  bool sampling = true;  // the run also samples (the sample op must exist on `device`)
  LoadFormat format = LoadFormat::Safetensors;
  std::string dir;           // Safetensors: the model directory
  ModelConfig dummy_config;  // Dummy: the architecture
  SyntheticOptions dummy;    // Dummy: dtype (bf16 | f32), fp8 layout, seed
  // Keep the loaded host weights next to the device copy (the per-block gate compares both);
  // otherwise a device run releases them once uploaded.
  bool keep_host_weights = false;
};

// Throws strata::Error naming the directory, file or tensor at fault.
std::unique_ptr<NemotronHModel> load_model(const LoadOptions& options);
std::unique_ptr<NemotronHModel> load_model(const std::string& dir, Device device,
                                           bool sampling = true);

// Parameters the config implies (tensors of spec 2.1; a tied lm_head counted once).
int64_t parameter_count(const ModelConfig& c);

}  // namespace strata::model
