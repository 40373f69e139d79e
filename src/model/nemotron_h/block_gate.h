// The per-block numeric gate (`strata gate`): every block of the model runs on the host (the
// reference kernels) and on the device from the same input, and the device output is compared
// with the host output. The inputs are prompt-derived: the device runs the model layer by layer
// (embedding, fused residual add + RMSNorm, block) over a prompt, and each block's normalized
// input is copied to the host for the reference; each layer's host weights are the loaded host
// views, or a host copy of that one layer when the weights were made on the device (dummy).
// Two phases per block: a prefill of the prompt (from empty state) and one decode token
// continuing from the state each side built itself.
//
// Bands (relative L2 of the block output, ||dev - host|| / ||host||), derived from the dtype:
//   * every activation store in the act dtype can round the other way on the device when its
//     f32 value differs in the last bits (other summation order): at most one ulp, i.e. a
//     relative change of 2^-7 for bf16, 2^-23 for f32, at each of the block's storage points
//     (Mamba 5: in_proj, conv, SSM y, gated norm, out_proj; attention 4: q/k/v, attention
//     output, o_proj, the KV rows are q/k/v's values; MLP 3: up, relu², down; MoE 6: the
//     expert's up, relu², down and weighted sum, the shared expert's output, the final add).
//     Flips are rare and spread, so the band of n storage points is n * 2^-7 (bf16) or
//     n * 2^-20 (f32: one ulp plus f32 reassociation over reductions of up to ~2^10 terms
//     of 2^-23 each, typical growth sqrt(K)).
//   * an FP8 linear computes W8A8 on the device and W8A16 on the host (ops.h). The gate checks
//     the kernels, not the quantization scheme: its host reference is fed the activations the
//     device multiplies, e4m3(x / input_scale) * input_scale (an op observer replaces the
//     linear's input), so such a linear adds nothing beyond the act-dtype stores. Where that
//     cannot be done (the routed experts' down_proj, whose input moe_experts makes inside;
//     their up_proj when the experts' input scales differ), the device's quantization of the
//     input, up to e4m3's unit roundoff 2^-4 relative per element, adds at most 2^-4 to that
//     linear's output: 2^-4 per such linear on a token's path. (Measured: W8A8 vs W8A16 moves
//     a Nemotron-3-Nano-shaped Mamba block ~27%: the SSM amplifies the activation rounding, so
//     a band for unemulated quantization would hide real kernel errors there.)
// Max abs difference is reported next to it (informative: its size depends on the values).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/nemotron_h/model.h"

namespace strata::model {

struct BlockGateRow {
  int64_t layer = 0;
  LayerKind kind = LayerKind::Mamba;
  std::string phase;        // "prefill" or "decode"
  int64_t fp8_linears = 0;  // W8A8 linears on the path whose quantization is not emulated
  double rel_l2 = 0, max_abs = 0, band = 0;
  int64_t elements = 0;
  bool ok() const { return rel_l2 <= band; }
};

struct BlockGateOptions {
  int64_t prompt_len = 16;
  uint64_t seed = 1;  // prompt ids
};

// The band of one block (see the header).
double block_band(LayerKind kind, DType act, int64_t fp8_linears);

// Runs the gate for a model whose weights are usable on both `device` and the host. Throws
// strata::Error when a block output is not finite on either side (reported as out of band).
std::vector<BlockGateRow> run_block_gate(NemotronHModel& m, OpContext& device_ctx,
                                         const BlockGateOptions& o);

}  // namespace strata::model
