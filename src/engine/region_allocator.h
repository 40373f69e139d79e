// A DeviceAllocator over one fixed device buffer: best-fit blocks carved from [base, base +
// bytes), freed blocks merged with their neighbours. The executor installs it while it
// captures decode graphs, so every graph's intermediates live in the same region (one graph
// runs at a time on one stream, and a replay's intermediates are dead once its logits are
// sampled): the graphs share one workspace instead of each holding its own.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "core/tensor.h"

namespace strata::engine {

class RegionAllocator final : public DeviceAllocator {
 public:
  static constexpr size_t kAlign = 256;
  // `copier` performs copies (the backend's allocator); the region never owns `base`.
  RegionAllocator(void* base, size_t bytes, Device device, DeviceAllocator* copier);

  std::shared_ptr<Storage> allocate(size_t bytes) override;
  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override;

  // Forgets every block (the caller guarantees none is in use) and the exhausted flag.
  void reset();
  // An allocation failed for lack of room since the last reset().
  bool exhausted() const { return exhausted_; }
  size_t peak_bytes() const { return peak_; }

 private:
  void release(size_t offset, size_t bytes);

  char* base_;
  size_t bytes_;
  Device device_;
  DeviceAllocator* copier_;
  std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length
  size_t used_ = 0, peak_ = 0;
  bool exhausted_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // blocks outliving the region
};

}  // namespace strata::engine
