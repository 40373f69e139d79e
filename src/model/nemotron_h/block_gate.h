// The per-block numeric gate (`strata gate`): every block of the model runs on the host (the
// reference kernels) and on the device from the same input, and the device output is compared
// with the host output. The inputs are prompt-derived: the device runs the model layer by layer
// (embedding, fused residual add + RMSNorm, block) over a prompt, and each block's normalized
// input is copied to the host for the reference; each layer's host weights are the loaded host
// views, or a host copy of that one layer when the weights were made on the device (dummy).
// Two phases per block: a prefill of the prompt (from empty state) and one decode token
// continuing from the state each side built itself.
//
// Bands (relative L2 of the block output, ||dev - host|| / ||host||):
//   * bf16 (any activation dtype narrower than f32): calibrated on every block run from a
//     measured host perturbation. The host reference runs the block a second time with f32
//     activations on the same input and weights (the prompt's first 32 tokens, in the prefill;
//     the decode row reuses its layer's figure); the relative L2 between the two host outputs is
//     the whole effect of the block's activation roundings on this very input, with whatever
//     amplification the block applies (the SSM, a router near a tie). A correct device kernel
//     rounds at the same points, so it differs from the host only where single roundings flip
//     (another summation order) or where it rounds an operand the host keeps in f32 (the
//     tensor-core scan rounds three, as vLLM's kernels do): a fraction of the same roundings.
//     The band is twice the measured rounding (never below 2^-9, half a bf16 ulp of the output
//     store). A 1% scale error, or every activation of a block's output linear one ulp too large,
//     falls out of it (tests/model/test_gate.cpp injects both). The worst-case sum this replaces
//     (2^-7 per storage point: 3.9% for a Mamba block) let a 1% defect through.
//   * f32: every activation store can round the other way when the device's f32 value differs in
//     the last bits (another summation order): one ulp plus reassociation over reductions of up to
//     ~2^10 terms of 2^-23 each (typical growth sqrt(K)): 2^-20 per storage point (Mamba 5:
//     in_proj, conv, SSM y, gated norm, out_proj; attention 4: q/k/v, attention output, o_proj;
//     MLP 3: up, relu², down; MoE 6: the expert's up, relu², down and weighted sum, the shared
//     expert's output, the final add).
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
// A systematic error hides in a wide relative L2 band: the scale component of the error,
// <dev - host, host> / <host, host>, is checked too. Rounding errors are unbiased, so theirs is
// ~ their relative L2 / sqrt(elements) (an output of thousands of elements: a few hundredths of
// the L2), while a scale error s shows as s itself. Scale band: the measured host rounding's own
// scale component (bf16 vs f32 activations has a small systematic part, ~0.1% in small blocks;
// the device rounds at the host's points, so its difference from the host has less) plus 4x
// what unbiased errors of half the L2 band show over the block's elements (band / 2 / sqrt(n)),
// plus 2^-24. A 1% scale, or every input of an output linear one bf16 ulp too large (a scale of
// ~0.55%), is out of it.
// Max abs difference is reported next to it (informative: its size depends on the values).
#pragma once

#include <cmath>
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
  double rounding = 0;  // bf16: the measured host rounding (host vs host with f32 activations)
  double rounding_scale = 0;         // |scale component| of that measured rounding
  double scale = 0, scale_band = 0;  // <dev - host, host> / <host, host> and its band
  int64_t elements = 0;
  bool ok() const { return rel_l2 <= band && std::abs(scale) <= scale_band; }
};

struct BlockGateOptions {
  int64_t prompt_len = 16;
  uint64_t seed = 1;  // prompt ids
};

// The band of one block (see the header); `measured_rounding` is used for narrow activations.
double block_band(LayerKind kind, DType act, int64_t fp8_linears, double measured_rounding);

// The band of the scale component for a block output of `elements` values (see the header), with
// an allowance per unemulated W8A8 linear on the path.
double scale_band(double band, double measured_scale, int64_t elements, int64_t fp8_linears = 0);

// Runs the gate for a model whose weights are usable on both `device` and the host. Throws
// strata::Error when a block output is not finite on either side (reported as out of band).
std::vector<BlockGateRow> run_block_gate(NemotronHModel& m, OpContext& device_ctx,
                                         const BlockGateOptions& o);

}  // namespace strata::model
