// `strata bench-kernels` scan rows: the chunked SSD scan (ssm_scan) per kernel, with its
// minimum-bytes ceilings and the per-kernel split of one call; and, asked for by name
// (--only "ssm_scan floor"), the io floor: one device-to-device copy of the io bytes, timed alike.
// One ssm_scan call per row: bf16 activations, f32 state, chunk 128, every sequence continuing
// from an initial state, inputs laid out as column ranges of one row (the model's layout), A and
// dt_bias drawn like Mamba2's init (A in [-16, -1], dt ~ 1e-3..1e-1). The working set (x, B, C,
// y and the chunk states) is far above the L2, so no rotation is needed. Reported: microseconds
// of one call, tokens/s, and TFLOP/s of the four chunk-local matrix products counted causally:
// C.B per group over s <= l (G N Lc(Lc+1)/2 per chunk), the chunk states and Y_off (Hm P N per
// token each), Y_diag over s <= l (Hm P Lc(Lc+1)/2 per chunk); two FLOPs per multiply-add.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace strata::cli::bench_kernels {

struct ScanStage {
  std::string kernel;
  double us = 0;
};

struct ScanRow {
  std::string kernel, shape;
  double tokens = 0, flops = 0, bytes = 0, io_bytes = 0, us = 0;
  std::vector<ScanStage> stages;  // the call's kernels in stream order, median microseconds
};

// Measures and prints the scan rows whose label contains `only` (all when empty).
std::vector<ScanRow> run_scan_rows(const std::string& only);
// Appends their markdown table to f (nothing when rows is empty).
void write_scan_rows(std::ostringstream& f, const std::vector<ScanRow>& rows);

}  // namespace strata::cli::bench_kernels
