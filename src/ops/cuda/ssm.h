// Launchers of the Mamba2 SSM: the chunked scan over packed sequences (prefill) and the
// one-token selective state update (decode). Math: spec section 3.2 step 6 / ops.h SsmScanArgs.
#pragma once

#include "ops/cuda/device_views.h"

namespace strata::cuda {

struct SsmLaunch {
  Mat x;                     // [T, Hm*P] act
  Mat dt_raw;                // [T, Hm] act
  Mat B, C;                  // [T, G*N] act
  const float* A = nullptr;  // [Hm]
  Vec D, dt_bias;            // [Hm] f32 or bf16
  float* states = nullptr;   // [S, Hm, P, N] f32
  int64_t num_slots = 0;
  Vec cu_seqlens, slots, has_initial;  // i32; cu_seqlens/has_initial unused by the update
  int64_t heads = 0, head_dim = 0, groups = 0, state_size = 0, chunk_size = 0;
  Mat out;  // [T, Hm*P] act
  // Scan only: scratch the caller allocates with the sizes below (f32 and i32 elements).
  float* scratch_f32 = nullptr;
  int32_t* scratch_i32 = nullptr;
};

// Limits of the chunked scan kernels.
constexpr int64_t kMaxScanChunk = 256;  // chunk_size
constexpr int64_t kMaxScanState = 256;  // state_size N

// Upper bound on chunks over all sequences: sum_b ceil(L_b / Q) <= (T + B * (Q - 1)) / Q.
int64_t ssm_scan_max_chunks(int64_t tokens, int64_t seqs, int64_t chunk);
int64_t ssm_scan_scratch_f32(const SsmLaunch& p);  // elements
int64_t ssm_scan_scratch_i32(const SsmLaunch& p);

void launch_ssm_update(const SsmLaunch& p, int* index_errors, void* stream);
void launch_ssm_scan(const SsmLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
