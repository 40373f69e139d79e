// Registrations of embedding and kv_cache_write on the CUDA backend.
#ifdef STRATA_HAVE_CUDA
#include <cmath>

#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/gather_scatter.h"
#include "ops/cuda/kernel_support.h"
#include "ops/ops.h"

namespace strata::cuda {
namespace {

using ops::EmbeddingArgs;
using ops::KvCacheWriteArgs;

bool embedding_supports(const EmbeddingArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.table, "table").on_device(a.ids, "ids").on_device(a.out, "out");
  c.act(a.table, "table")
      .same_dtype(a.table, a.out, "table", "out")
      .dtype(a.ids, DType::I32, "ids");
  c.rows(a.table, -1, -1, "table");
  if (c)
    c.contiguous(a.ids, Shape{a.ids.numel()}, "ids")
        .rows(a.out, a.ids.numel(), a.table.dim(1), "out");
  return c;
}
void embedding_run(const EmbeddingArgs& a, OpContext& ctx) {
  launch_embedding(mat_of(a.table), vec_of(a.ids), mat_of(a.out), context_of(ctx).index_errors(),
                   stream_of(ctx));
}

bool kv_write_supports(const KvCacheWriteArgs& a, std::string* why) {
  ArgCheck c(why);
  c.on_device(a.k, "k")
      .on_device(a.v, "v")
      .on_device(a.k_cache, "k_cache")
      .on_device(a.v_cache, "v_cache");
  c.on_device(a.slot_mapping, "slot_mapping").dtype(a.slot_mapping, DType::I32, "slot_mapping");
  c.act(a.k, "k").same_dtype(a.k, a.v, "k", "v");
  if (a.k_cache.dtype() == DType::F8E4M3) {  // fp8 cache: e4m3(k / k_scale)
    c.dtype(a.v_cache, DType::F8E4M3, "v_cache (k_cache is e4m3)");
    c.require(std::isfinite(a.k_scale) && a.k_scale > 0.f && std::isfinite(a.v_scale) &&
                  a.v_scale > 0.f,
              fmt::format("k_scale {} and v_scale {} must be finite and > 0", a.k_scale,
                          a.v_scale));
  } else {
    c.same_dtype(a.k, a.k_cache, "k", "k_cache").same_dtype(a.k, a.v_cache, "k", "v_cache");
  }
  c.require(
      a.k_cache.rank() == 4,
      fmt::format("k_cache {} must be [num_blocks, block_size, n_kv, head_dim]", a.k_cache.str()));
  if (!c) return false;
  const int64_t W = a.k_cache.dim(2) * a.k_cache.dim(3);
  c.contiguous(a.k_cache, a.k_cache.shape(), "k_cache")
      .contiguous(a.v_cache, a.k_cache.shape(), "v_cache");
  c.rows(a.k, -1, W, "k");
  if (c)
    c.rows(a.v, a.k.dim(0), W, "v").contiguous(a.slot_mapping, Shape{a.k.dim(0)}, "slot_mapping");
  return c;
}
void kv_write_run(const KvCacheWriteArgs& a, OpContext& ctx) {
  KvWriteLaunch p;
  p.k = mat_of(a.k);
  p.v = mat_of(a.v);
  p.k_cache = a.k_cache.raw();
  p.v_cache = a.v_cache.raw();
  p.num_blocks = a.k_cache.dim(0);
  p.block_size = a.k_cache.dim(1);
  p.slot_mapping = vec_of(a.slot_mapping);
  p.fp8 = a.k_cache.dtype() == DType::F8E4M3;
  p.k_scale = a.k_scale;
  p.v_scale = a.v_scale;
  launch_kv_cache_write(p, context_of(ctx).index_errors(), stream_of(ctx));
}

}  // namespace

STRATA_REGISTER_KERNEL(EmbeddingArgs, "cuda", Device::Cuda, embedding_supports, embedding_run);
STRATA_REGISTER_KERNEL(KvCacheWriteArgs, "cuda", Device::Cuda, kv_write_supports, kv_write_run);

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
