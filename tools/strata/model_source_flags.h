// Flag parsing shared by the commands that build a model from a preset or a config.json
// (make-checkpoint, the dummy load format of generate / logits / gate / bench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/nemotron_h/config.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::cli {

// Exactly one of `preset` / `config_path` must be given; `cmd` names the command in errors.
model::ModelConfig config_from_preset_or_file(const std::string& preset, const std::string& config_path,
                                              const char* cmd);

// "bf16" | "f32" | "fp8" (bf16 with the FP8 layout) -> options.
model::SyntheticOptions synthetic_options(const std::string& dtype, uint64_t seed, const char* cmd);

// "5GB", "500MB", "64KiB", "1000" (bytes) -> bytes; throws naming `flag`.
size_t parse_byte_size(const std::string& text, const char* flag);

}  // namespace strata::cli
