// The quantization metadata of a checkpoint against its tensors (spec 2.2): which ModelOpt
// algorithm the files declare, and whether every linear is stored as that layout says.
//   * NVFP4 and every algorithm other than FP8: refused (the io parser already names
//     algorithms strata does not know; NVFP4 is known but has no kernels yet).
//   * FP8: a linear stored f8e4m3 must not be excluded and must have a positive weight_scale
//     and a static input_scale (W8A8 on the device needs it); an excluded module must not be
//     f8e4m3. Linears that are neither excluded nor f8e4m3 (the MoE router, which ModelOpt never
//     quantizes) stay in the model dtype.
//   * f8e4m3 weights without any quantization metadata: refused, naming the tensor.
//   * k_scale / v_scale of attention layers (FP8 KV cache): read into AttentionWeights after
//     validation; the KV cache is kept in the activation dtype, which the log says once.
// Errors name the directory's metadata file, the tensor and the problem.
#pragma once

#include "io/quant_config.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/tensor_source.h"
#include "model/nemotron_h/weights.h"

namespace strata::model {

void check_quantization(const TensorSource& source, const ModelConfig& c, const io::QuantConfig& q,
                        ModelWeights& w);

}  // namespace strata::model
