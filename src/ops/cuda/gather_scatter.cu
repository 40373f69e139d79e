// Embedding gather and KV-cache scatter: pure copies, 16-byte moves when rows allow.
#include "ops/cuda/common.cuh"
#include "ops/cuda/gather_scatter.h"
#include "ops/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

// Copies `units` elements of type U per row (U = uint4 for 16-byte moves, else the element).
template <class U>
__global__ void embedding_kernel(const U* table, int64_t ld_table, int64_t vocab,
                                 const int32_t* ids, U* out, int64_t ld_out, int64_t units,
                                 int* errors) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool bad = id < 0 || id >= vocab;
  if (bad && threadIdx.x == 0) atomicAdd(errors, 1);
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) {
    U v;
    if (bad)
      memset(&v, 0, sizeof(U));
    else
      v = table[id * ld_table + i];
    out[t * ld_out + i] = v;
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <class U>
__global__ void kv_write_kernel(const U* k, int64_t ldk, const U* v, int64_t ldv, U* kc, U* vc,
                                int64_t num_blocks, int64_t block_size, int64_t units,
                                const int32_t* slots, int* errors) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0) return;  // padding token
  if (slot / block_size >= num_blocks) {
    if (i == 0) atomicAdd(errors, 1);
    return;
  }
  if (i >= units) return;
  kc[slot * units + i] = k[t * ldk + i];
  vc[slot * units + i] = v[t * ldv + i];
}

// grid (T, ceil(W / 128)): one element per thread, quantized into an e4m3 cache.
template <class TA>
__global__ void kv_write_fp8_kernel(KvWriteLaunch p, int* errors) {
  pdl_enter();
  const int64_t t = blockIdx.x, W = p.k.cols;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int32_t slot = static_cast<const int32_t*>(p.slot_mapping.p)[t];
  if (slot < 0) return;  // padding token
  if (slot / p.block_size >= p.num_blocks) {
    if (i == 0) atomicAdd(errors, 1);
    return;
  }
  if (i >= W) return;
  const float k = to_f32(static_cast<const TA*>(p.k.p)[t * p.k.ld + i]);
  const float v = to_f32(static_cast<const TA*>(p.v.p)[t * p.v.ld + i]);
  static_cast<uint8_t*>(p.k_cache)[slot * W + i] = f32_to_fp8_sat(k / p.k_scale);
  static_cast<uint8_t*>(p.v_cache)[slot * W + i] = f32_to_fp8_sat(v / p.v_scale);
}

}  // namespace

void launch_embedding(const Mat& table, const Vec& ids, const Mat& out, int* index_errors,
                      void* stream) {
  if (out.rows == 0 || out.cols == 0) return;
  const size_t es = dtype_size(table.dt);
  const bool vec = (out.cols * es) % 16 == 0 && (table.ld * es) % 16 == 0 &&
                   (out.ld * es) % 16 == 0 && aligned16(table.p) && aligned16(out.p);
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned rows = static_cast<unsigned>(out.rows);
  if (vec) {
    const int64_t per = 16 / static_cast<int64_t>(es);
    embedding_kernel<uint4><<<rows, 128, 0, s>>>(static_cast<const uint4*>(table.p), table.ld / per,
                                                 table.rows, static_cast<const int32_t*>(ids.p),
                                                 static_cast<uint4*>(out.p), out.ld / per,
                                                 out.cols / per, index_errors);
  } else if (es == 4) {
    embedding_kernel<uint32_t><<<rows, 256, 0, s>>>(static_cast<const uint32_t*>(table.p), table.ld,
                                                    table.rows, static_cast<const int32_t*>(ids.p),
                                                    static_cast<uint32_t*>(out.p), out.ld, out.cols,
                                                    index_errors);
  } else {
    embedding_kernel<uint16_t><<<rows, 256, 0, s>>>(static_cast<const uint16_t*>(table.p), table.ld,
                                                    table.rows, static_cast<const int32_t*>(ids.p),
                                                    static_cast<uint16_t*>(out.p), out.ld, out.cols,
                                                    index_errors);
  }
  STRATA_CUDA_LAUNCH_CHECK();
}

void launch_kv_cache_write(const KvWriteLaunch& p, int* index_errors, void* stream) {
  const int64_t T = p.k.rows, W = p.k.cols;
  if (T == 0 || W == 0) return;
  const size_t es = dtype_size(p.k.dt);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.fp8) {
    with_act(p.k.dt, [&](auto tag) {
      using TA = decltype(tag);
      launch_pdl(kv_write_fp8_kernel<TA>, dim3(static_cast<unsigned>(T), grid_1d(W, 128)),
                 dim3(128), 0, s, p, index_errors);
      STRATA_CUDA_LAUNCH_CHECK();
    });
    return;
  }
  const bool vec = (W * es) % 16 == 0 && (p.k.ld * es) % 16 == 0 && (p.v.ld * es) % 16 == 0 &&
                   aligned16(p.k.p) && aligned16(p.v.p) && aligned16(p.k_cache) &&
                   aligned16(p.v_cache);
  const auto* slots = static_cast<const int32_t*>(p.slot_mapping.p);
  auto launch = [&](auto unit, int64_t per) {
    using U = decltype(unit);
    const int64_t units = W / per;
    dim3 grid(static_cast<unsigned>(T), grid_1d(units, 128));
    launch_pdl(kv_write_kernel<U>, grid, dim3(128), 0, s, static_cast<const U*>(p.k.p),
               p.k.ld / per, static_cast<const U*>(p.v.p), p.v.ld / per, static_cast<U*>(p.k_cache),
               static_cast<U*>(p.v_cache), p.num_blocks, p.block_size, units, slots, index_errors);
    STRATA_CUDA_LAUNCH_CHECK();
  };
  if (vec)
    launch(uint4{}, 16 / static_cast<int64_t>(es));
  else if (es == 4)
    launch(uint32_t{}, 1);
  else
    launch(uint16_t{}, 1);
}

}  // namespace strata::cuda
