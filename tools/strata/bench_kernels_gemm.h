// `strata bench-kernels --only "gemm survey"`: the linear op as the model dispatches it (the
// first CUDA kernel that takes the shape) against every algorithm cuBLASLt's heuristic proposes
// (up to 16), on the Nemotron-H linear shapes at M = 2 .. 16,384 (issue 10 part 2: "within 80%
// of cuBLASLt's best algorithm"). bf16 rows: bf16 x, W and out; fp8 rows: W8A8 with the e4m3 x
// the producers write (no quantize pass), bf16 out. Runs only when --only selects it (it takes
// minutes). Reported: the dispatched kernel and its time, the heuristic's first proposal (what
// cuda.cublaslt runs), the fastest proposal, and best / dispatched (>= 0.8 meets the target).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace strata::cli::bench_kernels {

struct GemmSurveyRow {
  std::string shape, dispatched;  // e.g. "nano3 in_proj fp8 M=512", "cuda.cublaslt"
  double flops = 0;
  double us_dispatched = 0, us_first = 0, us_best = 0;
  int best_index = -1, proposals = 0;
};

// Measures and prints the survey rows whose label contains `only` (none when `only` is empty).
std::vector<GemmSurveyRow> run_gemm_survey(const std::string& only);
void write_gemm_survey(std::ostringstream& f, const std::vector<GemmSurveyRow>& rows);

}  // namespace strata::cli::bench_kernels
