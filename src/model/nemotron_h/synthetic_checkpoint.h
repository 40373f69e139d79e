// `strata make-checkpoint`: a synthetic checkpoint of any configuration written as the official
// release would be (config.json, safetensors shards in the spec 2.1 layout, and for FP8 the
// ModelOpt metadata of spec 2.2), one shard in memory at a time.
#pragma once

#include <cstddef>
#include <string>

#include "io/checkpoint_writer.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/synthetic.h"

namespace strata::model {

constexpr size_t kDefaultMaxShardBytes = size_t{5} * 1000 * 1000 * 1000;  // transformers' "5GB"

// Writes config.json (torch_dtype = options.dtype; for FP8 also quantization_config),
// hf_quant_config.json for FP8, and the weight shards into `dir`.
io::WrittenCheckpoint write_synthetic_checkpoint(const std::string& dir, const ModelConfig& c,
                                                 const SyntheticOptions& options,
                                                 size_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace strata::model
