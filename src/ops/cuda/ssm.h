// Launchers of the Mamba2 SSM: the chunked scan over packed sequences (prefill) and the
// one-token selective state update (decode). Math: spec section 3.2 step 6 / ops.h SsmScanArgs.
#pragma once

#include <functional>

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

// Limits of the chunked scan kernels (f32 math on CUDA cores, ssm_scan.cu).
constexpr int64_t kMaxScanChunk = 256;  // chunk_size
constexpr int64_t kMaxScanState = 256;  // state_size N

// Shapes of the bf16 tensor-core scan (ssm_scan_mma.cu): chunk and state sizes in steps of the
// mma tile (16), a warp per 16 positions of a chunk (at most 8 warps), and the head dims the
// kernels are instantiated for (every Nemotron-H member uses 64 or 80).
constexpr int64_t kMaxMmaScanChunk = 128;
constexpr int64_t kMaxMmaScanState = 256;
inline bool ssm_scan_mma_head_dim(int64_t P) {
  return P == 64 || P == 80;
}

// Upper bound on chunks over all sequences: sum_b ceil(L_b / Q) <= (T + B * (Q - 1)) / Q.
int64_t ssm_scan_max_chunks(int64_t tokens, int64_t seqs, int64_t chunk);
int64_t ssm_scan_scratch_f32(const SsmLaunch& p);  // elements
int64_t ssm_scan_scratch_i32(const SsmLaunch& p);

// The tensor-core scan's scratch: the same bookkeeping, C.B, chunk states, plus the bf16
// state entering each chunk (f32 and i32 elements).
int64_t ssm_scan_mma_scratch_f32(const SsmLaunch& p);
int64_t ssm_scan_mma_scratch_i32(const SsmLaunch& p);

// The one-pass tensor-core scan (ssm_scan_fused.cu): the tensor-core scan's shapes, and a state
// of at most two 16-column tiles per warp (N <= 2 chunk_size). Scratch: the chunk table, the f32
// state leaving each chunk and each chunk's own state and decay (look-back), a flag per (chunk,
// head) and a block ticket.
inline bool ssm_scan_fused_shape(int64_t chunk, int64_t N) {
  return N <= 2 * chunk;
}
int64_t ssm_scan_fused_scratch_f32(const SsmLaunch& p);
int64_t ssm_scan_fused_scratch_i32(const SsmLaunch& p);

// The one-pass scan on warpgroup products (ssm_scan_wg.cu, sm_90a wgmma): chunk 128, state 128,
// head_dim 64 or 80 (every Nemotron-H member), on an sm_90 device; the one-pass scan's scratch.
inline bool ssm_scan_wg_shape(int64_t chunk, int64_t N, int64_t P) {
  return chunk == 128 && N == 128 && (P == 64 || P == 80);
}
bool ssm_scan_wg_device();  // the current device is sm_90 (what the wgmma code is built for)
// The per-sequence wgmma scan (cuda.ssd_seq): a block per (sequence, head) walking its chunks;
// the wgmma scan's shapes and scratch. Head_dim 80 in ssm_scan_seq.cu (two warpgroups, the state
// in registers); head_dim 64 passed on to launch_ssm_scan_ws.
void launch_ssm_scan_seq(const SsmLaunch& p, int* index_errors, void* stream);
// Head_dim 64 (ssm_scan_ws.cu): four warpgroups split by role, and a cluster of 2-4 blocks per
// (sequence, head) taking its chunks in turn when the blocks would leave SMs idle.
void launch_ssm_scan_ws(const SsmLaunch& p, int* index_errors, void* stream);
// Where the per-sequence scan beats the chunk chain (ssm_scan_wg.cu) on the H200
// (docs/BENCHMARKS.md, "tenth session"): at most 4 (sequence, head) blocks per SM, so its one
// block per SM walks them in few waves, and on average 2 chunks or more per sequence, so its
// chunk pipeline fills (one sequence of 512-4,096 tokens: 14-18% faster); with many short
// sequences the chain's two blocks per SM win (16 x 128 tokens: 15-19%). Between the two
// (9B-v2 8 x 512, 1,024 blocks: the per-sequence scan 1.8% faster in one run) the rule keeps
// the chain: too close to call from one measurement.
inline bool ssm_scan_seq_preferred(int64_t tokens, int64_t seqs, int64_t heads, int64_t sms) {
  return seqs > 0 && seqs * heads <= 4 * sms && tokens >= 2 * 128 * seqs;
}
int ssm_scan_sm_count();  // the current device's SM count (cached)

// Profiling (strata bench-kernels' per-kernel split): while set on the launching host thread,
// the scan launchers call it right after enqueuing each of their kernels, with the kernel's
// name (the caller records a CUDA event there). Null (the default) = no calls.
using ScanStageMarker = std::function<void(const char* kernel)>;
inline thread_local const ScanStageMarker* scan_stage_marker = nullptr;
inline void mark_scan_stage(const char* kernel) {
  if (scan_stage_marker != nullptr) (*scan_stage_marker)(kernel);
}

void launch_ssm_update(const SsmLaunch& p, int* index_errors, void* stream);
void launch_ssm_scan(const SsmLaunch& p, int* index_errors, void* stream);
// bf16 activations only, shapes within the limits above (checked by its supports).
void launch_ssm_scan_mma(const SsmLaunch& p, int* index_errors, void* stream);
// `lookback`: a chunk block may start from an earlier chunk's state and the own states between
// (decoupled look-back) instead of waiting for its predecessor's (the plain chain).
void launch_ssm_scan_fused(const SsmLaunch& p, bool lookback, int* index_errors, void* stream);
// The shapes of ssm_scan_wg_shape, x / B / C views 16-byte aligned (checked by its supports).
void launch_ssm_scan_wg(const SsmLaunch& p, int* index_errors, void* stream);

}  // namespace strata::cuda
