#include "engine/region_allocator.h"

#include "core/check.h"

namespace strata::engine {

RegionAllocator::RegionAllocator(void* base, size_t bytes, Device device, DeviceAllocator* copier)
    : base_(static_cast<char*>(base)), bytes_(bytes), device_(device), copier_(copier) {
  reset();
}

void RegionAllocator::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  free_.clear();
  free_[0] = bytes_;
  used_ = 0;
  exhausted_ = false;
  alive_ = std::make_shared<int>(0);  // blocks of the previous round free nothing
}

std::shared_ptr<Storage> RegionAllocator::allocate(size_t bytes) {
  const size_t need = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= need && (best == free_.end() || it->second < best->second)) best = it;
    if (best == free_.end()) {
      exhausted_ = true;
      fail("graph workspace region of {} bytes is full ({} in use, {} more asked)", bytes_, used_,
           need);
    }
    offset = best->first;
    const size_t len = best->second;
    free_.erase(best);
    if (len > need) free_[offset + need] = len - need;
    used_ += need;
    peak_ = std::max(peak_, used_);
  }
  auto s = std::make_shared<Storage>();
  s->data = base_ + offset;
  s->bytes = bytes;
  s->device = device_;
  std::weak_ptr<int> round = alive_;
  s->release = [this, offset, need, round] {
    if (!round.expired()) release(offset, need);
  };
  return s;
}

void RegionAllocator::release(size_t offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_[offset] = bytes;
}

void RegionAllocator::copy(void* dst, Device dst_dev, const void* src, Device src_dev,
                           size_t bytes) {
  copier_->copy(dst, dst_dev, src, src_dev, bytes);
}

}  // namespace strata::engine
