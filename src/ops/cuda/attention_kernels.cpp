// Registration of attention on the CUDA backend: "cuda.decode" (bf16 decode at the real models'
// shapes: tensor cores, fused split combine) is registered first, so ops::run prefers it;
// "cuda.flash" (prefill, mixed and e4m3-cache decode steps, bf16 or e4m3 caches, head_dim
// 64/128, tensor cores, split-K when the grid is small);
// "cuda" (the general family: prefill and decode, f32 and bf16, head_dim 1..256, act or e4m3
// caches) takes the rest.
#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "ops/cuda/attention.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/kernel_support.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::AttentionArgs;

bool attention_supports(const AttentionArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.q, "q").on_device(a.k_cache, "k_cache").on_device(a.v_cache, "v_cache");
  c.on_device(a.block_tables, "block_tables").on_device(a.cu_seqlens_q, "cu_seqlens_q");
  c.on_device(a.context_lens, "context_lens").on_device(a.out, "out");
  c.act(a.q, "q");
  if (a.k_cache.dtype() == DType::F8E4M3) {  // FP8 KV: code * k_scale
    c.dtype(a.v_cache, DType::F8E4M3, "v_cache (k_cache is e4m3)");
    c.require(std::isfinite(a.k_scale) && a.k_scale > 0.f && std::isfinite(a.v_scale) &&
                  a.v_scale > 0.f,
              fmt::format("k_scale {} and v_scale {} must be finite and > 0", a.k_scale,
                          a.v_scale));
  } else {
    c.same_dtype(a.q, a.k_cache, "q", "k_cache").same_dtype(a.q, a.v_cache, "q", "v_cache");
  }
  c.same_dtype(a.q, a.out, "q", "out").dtype(a.block_tables, DType::I32, "block_tables");
  c.dtype(a.cu_seqlens_q, DType::I32, "cu_seqlens_q")
      .dtype(a.context_lens, DType::I32, "context_lens");
  c.require(a.n_heads > 0 && a.n_kv_heads > 0 && a.n_heads % a.n_kv_heads == 0,
            fmt::format("n_heads {} must be a positive multiple of n_kv_heads {}", a.n_heads,
                        a.n_kv_heads));
  if (!c) return false;
  c.require(attention_head_dim_supported(a.head_dim),
            fmt::format("head_dim {} outside 1..{}", a.head_dim, kAttentionMaxHeadDim));
  c.require(a.n_heads / a.n_kv_heads <= 64,
            fmt::format("GQA group {} above 64 query heads per kv head", a.n_heads / a.n_kv_heads));
  c.require(a.max_q_len >= 1, fmt::format("max_q_len {} must be >= 1", a.max_q_len));
  c.rows(a.q, -1, a.n_heads * a.head_dim, "q");
  c.require(a.k_cache.rank() == 4,
            fmt::format("k_cache {} must be [num_blocks, block_size, n_kv, hd]", a.k_cache.str()));
  if (!c) return false;
  const Shape cache{a.k_cache.dim(0), a.k_cache.dim(1), a.n_kv_heads, a.head_dim};
  c.contiguous(a.k_cache, cache, "k_cache").contiguous(a.v_cache, cache, "v_cache");
  c.rows(a.block_tables, -1, -1, "block_tables");
  if (!c) return false;
  const int64_t B = a.block_tables.dim(0);
  c.require(B >= 1 && B <= 65535, fmt::format("{} sequences (1..65535)", B));
  c.contiguous(a.cu_seqlens_q, Shape{B + 1}, "cu_seqlens_q")
      .contiguous(a.context_lens, Shape{B}, "context_lens");
  c.rows(a.out, a.q.dim(0), a.n_heads * a.head_dim, "out");
  return c;
}

AttentionLaunch launch_of(const AttentionArgs& a) {
  AttentionLaunch p;
  p.q = mat_of(a.q);
  p.k_cache = a.k_cache.raw();
  p.v_cache = a.v_cache.raw();
  p.num_blocks = a.k_cache.dim(0);
  p.block_size = a.k_cache.dim(1);
  p.block_tables = mat_of(a.block_tables);
  p.cu_seqlens_q = vec_of(a.cu_seqlens_q);
  p.context_lens = vec_of(a.context_lens);
  p.n_heads = a.n_heads;
  p.n_kv_heads = a.n_kv_heads;
  p.head_dim = a.head_dim;
  p.max_q_len = a.max_q_len;
  p.scale = a.scale;
  p.fp8_cache = a.k_cache.dtype() == DType::F8E4M3;
  p.k_scale = p.fp8_cache ? a.k_scale : 1.f;
  p.v_scale = p.fp8_cache ? a.v_scale : 1.f;
  p.out = mat_of(a.out);
  return p;
}

void attention_run(const AttentionArgs& a, OpContext& ctx) {
  AttentionLaunch p = launch_of(a);
  Tensor partials;
  if (a.max_q_len == 1) {
    const int64_t forced = attention_splits_override();
    p.n_splits =
        forced > 0 ? forced : attention_decode_splits(p, context_of(ctx).multiprocessor_count());
    if (p.n_splits > 1) {
      partials = Tensor::empty(Shape{attention_partials_floats(p)}, DType::F32, Device::Cuda);
      p.partials = partials.data<float>();
    }
  }
  launch_attention(p, context_of(ctx).index_errors(), stream_of(ctx));
}

// ---- cuda.decode ----

// Keys each split streams at least (a full-width context): enough to amortize the split's
// partial (group x (head_dim + 2) f32) and the pipeline start. STRATA_ATTENTION_SPLIT_KEYS
// overrides it (a tuning knob for `strata bench-kernels`, read once).
int64_t min_split_keys() {
  static const int64_t v = [] {
    const char* e = std::getenv("STRATA_ATTENTION_SPLIT_KEYS");
    const long long n = e ? std::atoll(e) : 0;
    return n >= 16 ? static_cast<int64_t>(n) : int64_t{256};
  }();
  return v;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

bool decode_supports(const AttentionArgs& a, std::string* why) {
  if (!attention_supports(a, why)) return false;
  ArgCheck c(why);
  const int64_t group = a.n_heads / a.n_kv_heads;
  c.require(a.max_q_len == 1, fmt::format("max_q_len {}: decode only", a.max_q_len));
  c.require(a.q.dtype() == DType::BF16, fmt::format("q {}: bf16 only", a.q.str()));
  c.require(a.k_cache.dtype() == DType::BF16,
            fmt::format("k_cache {}: bf16 caches only (e4m3 goes to the general kernel)",
                        a.k_cache.str()));
  c.require(attention_decode_shape_supported(a.head_dim, group),
            fmt::format("head_dim {} / GQA group {}: kernels for head_dim 64, 128 and groups "
                        "up to {}",
                        a.head_dim, group, kDecodeMaxGroup));
  if (!c) return false;
  const Mat q = mat_of(a.q);
  c.require(aligned16(a.q.raw()) && (q.rows <= 1 || q.ld % 8 == 0),
            fmt::format("q {}: rows must start 16-byte aligned", a.q.str()));
  c.require(aligned16(a.k_cache.raw()) && aligned16(a.v_cache.raw()),
            "k_cache / v_cache must start 16-byte aligned");
  if (!c) return false;
  const DecodeAttentionPlan plan =
      plan_attention_decode(launch_of(a), multiprocessor_count(), min_split_keys());
  c.require(plan.splits >= 1,
            fmt::format("block size {} x {} table columns: a split's page entries exceed {}",
                        a.k_cache.dim(1), a.block_tables.dim(1), kDecodeMaxPagesPerSplit));
  return c;
}

// The split tickets of one device context, zeroed when made; every launch leaves them zero.
struct DecodeTickets {
  std::mutex mu;
  int* p = nullptr;
  ~DecodeTickets() {
    if (p) (void)cudaFree(p);  // no check: destructors must not throw
  }
};
const char kTicketsKey = 0;

// dc's tickets, made on first use; nullptr while dc's stream is being captured and they do not
// exist yet (a capture cannot zero them for later eager launches).
int* decode_tickets(DeviceContext& dc) {
  auto& t = dc.local<DecodeTickets>(&kTicketsKey, [] { return std::make_shared<DecodeTickets>(); });
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.p) return t.p;
  auto s = static_cast<cudaStream_t>(dc.stream());
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st != cudaStreamCaptureStatusNone) return nullptr;
  const size_t bytes = static_cast<size_t>(attention_decode_ticket_count()) * sizeof(int);
  int* c = nullptr;
  STRATA_CUDA_CHECK(cudaMalloc(&c, bytes));
  STRATA_CUDA_CHECK(cudaMemsetAsync(c, 0, bytes, s));
  t.p = c;
  return c;
}

void decode_run(const AttentionArgs& a, OpContext& ctx) {
  AttentionLaunch p = launch_of(a);
  DeviceContext& dc = context_of(ctx);
  DecodeAttentionPlan plan = plan_attention_decode(p, dc.multiprocessor_count(), min_split_keys());
  int* tickets = plan.splits > 1 ? decode_tickets(dc) : nullptr;
  if (plan.splits > 1 && !tickets) {
    // First use inside a graph capture: the tickets cannot be zeroed for later eager launches
    // now, so this capture runs the context as one split when its pages fit, else the general
    // kernel.
    const int64_t max_ctx = p.block_tables.cols * p.block_size;
    plan.splits = 1;
    plan.split_len = (max_ctx + 15) / 16 * 16;
    if (plan.split_len / p.block_size + 2 > kDecodeMaxPagesPerSplit) {
      attention_run(a, ctx);
      return;
    }
  }
  Tensor partials;
  if (plan.splits > 1) {
    partials = Tensor::empty(Shape{attention_decode_partials_floats(p, plan)}, DType::F32,
                             Device::Cuda);
    p.partials = partials.data<float>();
  }
  launch_attention_decode(p, plan, tickets, dc.index_errors(), stream_of(ctx));
}

// ---- cuda.flash ----

bool flash_supports(const AttentionArgs& a, std::string* why) {
  if (!attention_supports(a, why)) return false;
  ArgCheck c(why);
  c.require(a.q.dtype() == DType::BF16, fmt::format("q {}: bf16 only", a.q.str()));
  c.require(attention_flash_shape_supported(a.head_dim, a.n_heads / a.n_kv_heads),
            fmt::format("head_dim {} / GQA group {}: head_dim 64 or 128, groups up to 64",
                        a.head_dim, a.n_heads / a.n_kv_heads));
  c.require(a.n_heads <= 65535,
            fmt::format("{} heads (the split combine's grid: up to 65535)", a.n_heads));
  if (!c) return false;
  const Mat q = mat_of(a.q), out = mat_of(a.out);
  c.require(reinterpret_cast<uintptr_t>(a.q.raw()) % 4 == 0 && q.ld % 2 == 0 &&
                reinterpret_cast<uintptr_t>(a.out.raw()) % 4 == 0 && out.ld % 2 == 0,
            "q and out rows must be 4-byte aligned");
  c.require(aligned16(a.k_cache.raw()) && aligned16(a.v_cache.raw()),
            "k_cache / v_cache must start 16-byte aligned");
  c.require(!kernel_disabled(AttentionArgs::kName, "cuda.flash"),
            "disabled by STRATA_CUDA_DISABLE_KERNELS");
  return c;
}

void flash_run(const AttentionArgs& a, OpContext& ctx) {
  AttentionLaunch p = launch_of(a);
  p.n_splits = attention_flash_splits(p, context_of(ctx).multiprocessor_count());
  Tensor partials;
  if (p.n_splits > 1) {
    partials = Tensor::empty(Shape{attention_flash_partials_floats(p)}, DType::F32, Device::Cuda);
    p.partials = partials.data<float>();
  }
  launch_attention_flash(p, context_of(ctx).index_errors(), stream_of(ctx));
}

std::atomic<int64_t>& splits_override() {
  static std::atomic<int64_t> v{[] {
    const char* e = std::getenv("STRATA_ATTENTION_SPLITS");
    const long long n = e ? std::atoll(e) : 0;
    return n > 0 ? static_cast<int64_t>(n) : int64_t{0};
  }()};
  return v;
}

}  // namespace

void set_attention_splits_override(int64_t n) {
  splits_override().store(n > 0 ? n : 0);
}
int64_t attention_splits_override() {
  return splits_override().load();
}

// Registration order = preference: the decode kernel first, then flash attention for prefill
// and mixed steps, then the general family.
STRATA_REGISTER_KERNEL(AttentionArgs, "cuda.decode", Device::Cuda, decode_supports, decode_run);
STRATA_REGISTER_KERNEL(AttentionArgs, "cuda.flash", Device::Cuda, flash_supports, flash_run);
STRATA_REGISTER_KERNEL(AttentionArgs, "cuda", Device::Cuda, attention_supports, attention_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
