// Registrations of ssm_scan (chunked prefill) and ssm_update (decode) on the CUDA backend.
// ssm_scan has six kernels, tried in this order: "cuda.ssd_wg" (the one-pass chain on sm_90
// warpgroup products, chunk and state 128, aligned views; it defers to the next for a few long
// sequences), "cuda.ssd_seq" (the same shapes and products, a block or a cluster per (sequence,
// head) with the state in registers),
// "cuda.ssd_chain" and "cuda.ssd_fused" (bf16 on tensor cores in one pass, the state passing
// between chunk blocks by a plain chain or by decoupled look-back), "cuda.ssd_mma" (bf16 on
// tensor cores in separate chunk-state, state-passing and output kernels; the shapes of ssm.h)
// and "cuda" (f32 math on CUDA cores, any act dtype).
#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernel_support.h"
#include "ops/cuda/ssm.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::SsmScanArgs;
using ops::SsmUpdateArgs;

// Checks shared by scan and update; `T` = rows of x (tokens or sequences).
template <class A>
void check_ssm(ArgCheck& c, const A& a) {
  c.on_device(a.x, "x").on_device(a.dt_raw, "dt_raw").on_device(a.A, "A").on_device(a.B, "B");
  c.on_device(a.C, "C")
      .on_device(a.D, "D")
      .on_device(a.dt_bias, "dt_bias")
      .on_device(a.ssm_states, "ssm_states");
  c.on_device(a.slots, "slots").on_device(a.out, "out");
  c.act(a.x, "x").same_dtype(a.x, a.dt_raw, "x", "dt_raw").same_dtype(a.x, a.B, "x", "B");
  c.same_dtype(a.x, a.C, "x", "C").same_dtype(a.x, a.out, "x", "out").dtype(a.A, DType::F32, "A");
  c.dtype(a.ssm_states, DType::F32, "ssm_states").dtype(a.slots, DType::I32, "slots");
  c.require(a.D.dtype() == DType::F32 || a.D.dtype() == a.x.dtype(),
            fmt::format("D {} must be f32 or the act dtype", a.D.str()));
  c.require(a.dt_bias.dtype() == DType::F32 || a.dt_bias.dtype() == a.x.dtype(),
            fmt::format("dt_bias {} must be f32 or the act dtype", a.dt_bias.str()));
  const int64_t Hm = a.heads, P = a.head_dim, G = a.groups, N = a.state_size;
  c.require(Hm > 0 && P > 0 && G > 0 && N > 0 && Hm % G == 0,
            fmt::format("heads {} / head_dim {} / groups {} / state_size {}: need positive sizes "
                        "and groups dividing heads",
                        Hm, P, G, N));
  if (!c) return;
  const int64_t T = a.x.dim(0);
  c.rows(a.x, -1, Hm * P, "x");
  if (!c) return;
  c.rows(a.dt_raw, T, Hm, "dt_raw")
      .rows(a.B, T, G * N, "B")
      .rows(a.C, T, G * N, "C")
      .rows(a.out, T, Hm * P, "out");
  c.contiguous(a.A, Shape{Hm}, "A")
      .contiguous(a.D, Shape{Hm}, "D")
      .contiguous(a.dt_bias, Shape{Hm}, "dt_bias");
  c.require(a.ssm_states.rank() == 4,
            fmt::format("ssm_states {} must be [S, Hm, P, N]", a.ssm_states.str()));
  if (c) c.contiguous(a.ssm_states, Shape{a.ssm_states.dim(0), Hm, P, N}, "ssm_states");
}

template <class A>
SsmLaunch launch_of(const A& a) {
  SsmLaunch p;
  p.x = mat_of(a.x);
  p.dt_raw = mat_of(a.dt_raw);
  p.B = mat_of(a.B);
  p.C = mat_of(a.C);
  p.A = a.A.template data<float>();
  p.D = vec_of(a.D);
  p.dt_bias = vec_of(a.dt_bias);
  p.states = a.ssm_states.template data<float>();
  p.num_slots = a.ssm_states.dim(0);
  p.slots = vec_of(a.slots);
  p.heads = a.heads;
  p.head_dim = a.head_dim;
  p.groups = a.groups;
  p.state_size = a.state_size;
  p.out = mat_of(a.out);
  return p;
}

bool scan_supports(const SsmScanArgs& a, std::string* why) {
  ArgCheck c(why);
  check_ssm(c, a);
  c.on_device(a.cu_seqlens, "cu_seqlens").on_device(a.has_initial, "has_initial");
  c.dtype(a.cu_seqlens, DType::I32, "cu_seqlens").dtype(a.has_initial, DType::I32, "has_initial");
  if (!c) return false;
  const int64_t B = a.slots.numel();
  c.require(B >= 1 && B <= 65535, fmt::format("{} sequences (1..65535)", B));
  c.contiguous(a.slots, Shape{B}, "slots").contiguous(a.cu_seqlens, Shape{B + 1}, "cu_seqlens");
  c.contiguous(a.has_initial, Shape{B}, "has_initial");
  c.require(a.chunk_size >= 1 && a.chunk_size <= kMaxScanChunk,
            fmt::format("chunk_size {} outside 1..{}", a.chunk_size, kMaxScanChunk));
  c.require(a.state_size <= kMaxScanState,
            fmt::format("state_size {} above {}", a.state_size, kMaxScanState));
  return c;
}

bool scan_mma_supports(const SsmScanArgs& a, std::string* why) {
  if (!scan_supports(a, why)) return false;
  ArgCheck c(why);
  c.require(a.x.dtype() == DType::BF16,
            fmt::format("act dtype {}: the tensor-core scan takes bf16 (f32 runs on \"cuda\")",
                        dtype_name(a.x.dtype())));
  c.require(ssm_scan_mma_head_dim(a.head_dim),
            fmt::format("head_dim {}: instantiated for 64 and 80", a.head_dim));
  c.require(
      a.chunk_size % 16 == 0 && a.chunk_size <= kMaxMmaScanChunk,
      fmt::format("chunk_size {}: a multiple of 16 up to {}", a.chunk_size, kMaxMmaScanChunk));
  c.require(
      a.state_size % 16 == 0 && a.state_size <= kMaxMmaScanState,
      fmt::format("state_size {}: a multiple of 16 up to {}", a.state_size, kMaxMmaScanState));
  return c;
}

constexpr char kFusedName[] = "cuda.ssd_fused";
constexpr char kChainName[] = "cuda.ssd_chain";
constexpr char kWgName[] = "cuda.ssd_wg";
constexpr char kSeqName[] = "cuda.ssd_seq";

// The one-pass kernels; either can be turned off for A/B runs (STRATA_CUDA_DISABLE_KERNELS).
template <const char* kKernel>
bool scan_fused_supports(const SsmScanArgs& a, std::string* why) {
  if (!scan_mma_supports(a, why)) return false;
  ArgCheck c(why);
  c.require(!kernel_disabled(SsmScanArgs::kName, kKernel),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  c.require(ssm_scan_fused_shape(a.chunk_size, a.state_size),
            fmt::format("state_size {} above 2 x chunk_size {}: two state tiles per warp at most",
                        a.state_size, a.chunk_size));
  return c;
}

// The wgmma chain: the one-pass shapes narrowed to chunk 128, state 128 and head_dim 64 / 80,
// x, B and C at 16-byte aligned addresses and row strides (its staging copies 16 bytes at a
// time, without a scalar path), on an sm_90 device.
bool aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.raw()) & 15u) == 0 && t.stride(0) % 8 == 0;
}
template <const char* kKernel>
bool scan_wg_supports(const SsmScanArgs& a, std::string* why) {
  if (!scan_fused_supports<kKernel>(a, why)) return false;
  ArgCheck c(why);
  c.require(ssm_scan_wg_shape(a.chunk_size, a.state_size, a.head_dim),
            fmt::format("chunk {} / state {} / head_dim {}: instantiated for 128 / 128 / 64 or 80",
                        a.chunk_size, a.state_size, a.head_dim));
  c.require(aligned16(a.x) && aligned16(a.B) && aligned16(a.C),
            "x, B and C need 16-byte aligned rows (16-byte staging copies)");
  if (c) c.require(ssm_scan_wg_device(), "wgmma needs an sm_90 device");
  return c;
}

// The chain gives way to cuda.ssd_seq (registered next) where that measured faster.
bool wg_defers(const SsmScanArgs& a) {
  return ssm_scan_seq_preferred(a.x.dim(0), a.slots.dim(0), a.heads, ssm_scan_sm_count());
}

enum class ScanPath { kF32Math, kMma, kFused, kChain, kWg, kSeq };

template <ScanPath kPath>
void scan_run(const SsmScanArgs& a, OpContext& ctx) {
  SsmLaunch p = launch_of(a);
  p.cu_seqlens = vec_of(a.cu_seqlens);
  p.has_initial = vec_of(a.has_initial);
  p.chunk_size = a.chunk_size;
  constexpr bool kMma = kPath != ScanPath::kF32Math;
  constexpr bool kFused = kPath == ScanPath::kFused || kPath == ScanPath::kChain ||
                          kPath == ScanPath::kWg || kPath == ScanPath::kSeq;
  const int64_t nf = kFused ? ssm_scan_fused_scratch_f32(p)
                     : kMma ? ssm_scan_mma_scratch_f32(p)
                            : ssm_scan_scratch_f32(p);
  const int64_t ni = kFused ? ssm_scan_fused_scratch_i32(p)
                     : kMma ? ssm_scan_mma_scratch_i32(p)
                            : ssm_scan_scratch_i32(p);
  // Scratch from the arena, released when this returns: later users are later on the stream.
  Tensor f = Tensor::empty(Shape{std::max<int64_t>(1, nf)}, DType::F32, Device::Cuda);
  Tensor i = Tensor::empty(Shape{std::max<int64_t>(1, ni)}, DType::I32, Device::Cuda);
  p.scratch_f32 = f.data<float>();
  p.scratch_i32 = i.data<int32_t>();
  if (kPath == ScanPath::kSeq)
    launch_ssm_scan_seq(p, context_of(ctx).index_errors(), stream_of(ctx));
  else if (kPath == ScanPath::kWg)
    launch_ssm_scan_wg(p, context_of(ctx).index_errors(), stream_of(ctx));
  else if (kFused)
    launch_ssm_scan_fused(p, kPath == ScanPath::kFused, context_of(ctx).index_errors(),
                          stream_of(ctx));
  else if (kPath == ScanPath::kMma)
    launch_ssm_scan_mma(p, context_of(ctx).index_errors(), stream_of(ctx));
  else
    launch_ssm_scan(p, context_of(ctx).index_errors(), stream_of(ctx));
}

bool update_supports(const SsmUpdateArgs& a, std::string* why) {
  ArgCheck c(why);
  check_ssm(c, a);
  if (c) c.contiguous(a.slots, Shape{a.x.dim(0)}, "slots");
  c.require(a.x.dim(0) * a.heads < (int64_t{1} << 31), "too many sequences x heads for one launch");
  return c;
}
void update_run(const SsmUpdateArgs& a, OpContext& ctx) {
  launch_ssm_update(launch_of(a), context_of(ctx).index_errors(), stream_of(ctx));
}

}  // namespace

// The wgmma chain first where it applies: on the H200 it measured as fast as the chain at one
// sequence (within +-1.3%) and 3-15% faster with several (8x512, 16x128), and the same in the
// Nano-3 prefill (docs/BENCHMARKS.md, "Prefill scan, round 6"). It defers to the per-sequence
// kernel for a few long sequences (ssm_scan_seq_preferred; "tenth session").
STRATA_REGISTER_KERNEL(SsmScanArgs, kWgName, Device::Cuda, scan_wg_supports<kWgName>,
                       scan_run<ScanPath::kWg>, wg_defers);
// The per-sequence kernel next: it takes what the chain defers, or everything with cuda.ssd_wg
// disabled (A/B).
STRATA_REGISTER_KERNEL(SsmScanArgs, kSeqName, Device::Cuda, scan_wg_supports<kSeqName>,
                       scan_run<ScanPath::kSeq>);
// The chain next: on the H200 it measured faster than the look-back in 7 of the 8 bench-kernels
// rows (docs/BENCHMARKS.md, "Prefill scan, round 4").
STRATA_REGISTER_KERNEL(SsmScanArgs, kChainName, Device::Cuda, scan_fused_supports<kChainName>,
                       scan_run<ScanPath::kChain>);
STRATA_REGISTER_KERNEL(SsmScanArgs, kFusedName, Device::Cuda, scan_fused_supports<kFusedName>,
                       scan_run<ScanPath::kFused>);
STRATA_REGISTER_KERNEL(SsmScanArgs, "cuda.ssd_mma", Device::Cuda, scan_mma_supports,
                       scan_run<ScanPath::kMma>);
STRATA_REGISTER_KERNEL(SsmScanArgs, "cuda", Device::Cuda, scan_supports,
                       scan_run<ScanPath::kF32Math>);
STRATA_REGISTER_KERNEL(SsmUpdateArgs, "cuda", Device::Cuda, update_supports, update_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
