// `strata quantize --format fp8 IN OUT`: a ModelOpt-format FP8 checkpoint (spec 2.2) from a
// BF16 (or F32) one. Per quantized linear (the official selective layout, fp8_layout.h):
//   weight_scale = amax(|W|) / 448,  weight = sat_e4m3(W / weight_scale)   (per tensor)
//   input_scale  = amax(|x|) / 448 over the calibration tokens (fp8_calibration.h)
// A routed expert no calibration token reached takes the largest input amax of its layer's
// experts (the same projection), as its scale must still cover whatever a real input brings.
// Everything else is copied unchanged; config.json gains quantization_config and
// hf_quant_config.json is written; the directory's other files (tokenizer, generation config,
// chat templates) are copied. Shards are written one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::model {

struct QuantizeOptions {
  int64_t calib_sequences = 4;
  int64_t calib_length = 64;
  size_t max_shard_bytes = size_t{5} * 1000 * 1000 * 1000;
};

struct QuantizeSummary {
  int64_t quantized = 0;     // linears written as e4m3
  int64_t kept = 0;          // tensors copied unchanged
  int64_t uncalibrated = 0;  // experts that took their layer's input amax
  size_t bytes_in = 0, bytes_out = 0;
};

QuantizeSummary quantize_fp8(const std::string& in_dir, const std::string& out_dir,
                             const QuantizeOptions& o);

}  // namespace strata::model
