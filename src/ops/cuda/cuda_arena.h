// The device arena: cudaMalloc'd slabs (plain device memory, never managed memory), carved
// into 256-byte aligned blocks; freed blocks return to their slab and merge with free
// neighbours, so steady-state steps allocate without calling cudaMalloc. Implements
// DeviceAllocator (core/tensor.h) and counts every copy it makes by direction.
//
// Blocks are reused in stream order: all kernels and copies of the backend run on one stream,
// so a block freed after enqueuing work and handed out again is only touched by work enqueued
// later on the same stream.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace strata::cuda {

struct CopyCounters {
  int64_t h2d = 0, d2h = 0, d2d = 0;                    // number of transfers
  int64_t h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;  // bytes moved
};

struct ArenaStats {
  size_t reserved_bytes = 0;  // held in slabs (cudaMalloc'd)
  size_t used_bytes = 0;      // handed out in live blocks
  size_t peak_used_bytes = 0;
  int64_t slabs = 0;
  int64_t live_blocks = 0;
};

class Arena final : public DeviceAllocator {
 public:
  static constexpr size_t kAlign = 256;
  static constexpr size_t kSlabBytes = size_t{256} << 20;  // smallest slab
  explicit Arena(void* stream) : stream_(stream) {}
  ~Arena() override;

  std::shared_ptr<Storage> allocate(size_t bytes) override;
  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override;

  // Host -> device without waiting: `src` must be pinned and stay untouched until the stream
  // reaches the copy (the executor's step-input staging). Counted like copy().
  void copy_h2d_async(void* dst, const void* src, size_t bytes);
  // Device -> pinned host without waiting (the caller waits on an event). Counted like copy().
  void copy_d2h_async(void* dst, const void* src, size_t bytes);

  ArenaStats stats() const;
  CopyCounters copies() const;
  // Returns slabs with no live block to the driver (called before failing an allocation).
  void trim();

 private:
  struct Slab {
    char* base = nullptr;
    size_t bytes = 0;
    std::map<size_t, size_t> free;  // offset -> length, non-adjacent ranges
    int64_t live = 0;
  };
  bool carve(size_t need, size_t* slab, size_t* offset);  // best fit; lock held
  void release(size_t slab, size_t offset, size_t bytes);

  void* stream_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Slab>> slabs_;
  size_t used_ = 0, peak_ = 0;
  int64_t live_ = 0;
  std::atomic<int64_t> h2d_{0}, d2h_{0}, d2d_{0}, h2d_b_{0}, d2h_b_{0}, d2d_b_{0};
};

}  // namespace strata::cuda
