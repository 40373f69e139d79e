// `strata bench-kernels` small-op rows (--only small-op): the memory-bound ops of a prefill or
// batched-decode step on Nano-3's shapes at T = 1 to 2,048 tokens, per CUDA kernel (the
// op's kernels by name, so a new form and the one it replaces are timed side by side). Bytes:
// what the op must read and write at least; time: one launch, graph replay, inputs rotated over
// enough copies to exceed the L2 (as the other rows).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "bench_kernels_util.h"

namespace strata::cli::bench_kernels {

using SmallRow = BandwidthRow;

// Measures and prints the rows whose label contains `only` (all when empty).
std::vector<SmallRow> run_small_rows(const std::string& only);
// Appends their markdown table to f (nothing when rows is empty).
void write_small_rows(std::ostringstream& f, const std::vector<SmallRow>& rows);

}  // namespace strata::cli::bench_kernels
