// Flag parsing shared by the commands that build a model from a preset or a config.json
// (make-checkpoint, the dummy load format of generate / logits / gate / bench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include <memory>

#include "model/nemotron_h/config.h"
#include "model/nemotron_h/load.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::cli {

// Where a command's model comes from: --model DIR (safetensors), or --load-format dummy with
// --preset NAME | --config config.json, --dtype and --dummy-seed (random weights made on the
// run's device, no files); plus --force-host-ops for device runs.
struct ModelSourceFlags {
  std::string model, load_format = "auto", preset, config, dtype = "bf16", force_host_ops;
  uint64_t dummy_seed = 1;
};

// Adds the flags to `sub` (--model is not marked required: dummy runs have no directory).
void add_model_source_flags(CLI::App* sub, ModelSourceFlags& f);

// Validates the combination and applies --force-host-ops; `cmd` names the command in errors.
model::LoadOptions load_options(const ModelSourceFlags& f, Device device, bool sampling,
                                const char* cmd);

// load_options + load_model, then the load report at info level.
std::unique_ptr<model::NemotronHModel> load_from_flags(const ModelSourceFlags& f, Device device,
                                                       bool sampling, const char* cmd);

// Exactly one of `preset` / `config_path` must be given; `cmd` names the command in errors.
model::ModelConfig config_from_preset_or_file(const std::string& preset,
                                              const std::string& config_path, const char* cmd);

// "bf16" | "f32" | "fp8" (bf16 with the FP8 layout) -> options.
model::SyntheticOptions synthetic_options(const std::string& dtype, uint64_t seed, const char* cmd);

// "5GB", "500MB", "64KiB", "1000" (bytes) -> bytes; throws naming `flag`.
size_t parse_byte_size(const std::string& text, const char* flag);

}  // namespace strata::cli
