#ifdef STRATA_HAVE_CUDA
#include "ops/cuda/cuda_arena.h"

#include <cuda_runtime.h>

#include "core/log.h"
#include "ops/cuda/cuda_check.h"

namespace strata::cuda {

namespace {
size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

Arena::~Arena() {
  // Frees nothing itself: a process context's arena lives until exit (its slabs go with the
  // driver, which may be gone by then); a context made by create() trims it before this.
}

bool Arena::carve(size_t need, size_t* slab, size_t* offset) {
  size_t best_len = SIZE_MAX;
  bool found = false;
  for (size_t s = 0; s < slabs_.size(); ++s) {
    for (const auto& [off, len] : slabs_[s]->free) {
      if (len >= need && len < best_len) {
        best_len = len;
        *slab = s;
        *offset = off;
        found = true;
      }
    }
  }
  if (!found) return false;
  Slab& sl = *slabs_[*slab];
  auto it = sl.free.find(*offset);
  const size_t len = it->second;
  sl.free.erase(it);
  if (len > need) sl.free.emplace(*offset + need, len - need);
  return true;
}

std::shared_ptr<Storage> Arena::allocate(size_t bytes) {
  const size_t need = round_up(bytes == 0 ? 1 : bytes, kAlign);
  size_t slab = 0, offset = 0;
  char* ptr = nullptr;
  Slab* slab_ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!carve(need, &slab, &offset)) {
      const size_t slab_bytes = std::max(kSlabBytes, round_up(need, size_t{2} << 20));
      void* p = nullptr;
      cudaError_t e = cudaMalloc(&p, slab_bytes);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // clear the (non-sticky) allocation error
        // Give empty slabs back and try once more before failing.
        for (auto& s : slabs_) {
          if (s && s->live == 0) {
            STRATA_CUDA_CHECK(cudaFree(s->base));
            s.reset();
          }
        }
        std::erase(slabs_, nullptr);
        e = cudaMalloc(&p, slab_bytes);
        if (e == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();
          size_t free_b = 0, total_b = 0;
          (void)cudaMemGetInfo(&free_b, &total_b);
          fail(
              "CUDA out of memory: allocating {} bytes (slab {} bytes); arena holds {} bytes in "
              "{} slabs, {} in use; device free {} of {} bytes",
              bytes, slab_bytes,
              [&] {
                size_t r = 0;
                for (auto& s : slabs_)
                  r += s->bytes;
                return r;
              }(),
              slabs_.size(), used_, free_b, total_b);
        }
      }
      STRATA_CUDA_CHECK(e);
      auto s = std::make_unique<Slab>();
      s->base = static_cast<char*>(p);
      s->bytes = slab_bytes;
      s->free.emplace(0, slab_bytes);
      slabs_.push_back(std::move(s));
      log::debug("cuda arena: new slab of {} bytes ({} slabs)", slab_bytes, slabs_.size());
      if (!carve(need, &slab, &offset)) fail("cuda arena: fresh slab cannot hold {} bytes", need);
    }
    slab_ptr = slabs_[slab].get();
    ptr = slab_ptr->base + offset;
    slab_ptr->live++;
    used_ += need;
    peak_ = std::max(peak_, used_);
    live_++;
  }
  auto st = std::make_shared<Storage>();
  st->data = ptr;
  st->bytes = bytes;
  st->device = Device::Cuda;
  // Slabs are never destroyed while a block is live, and the arena outlives every storage.
  st->release = [this, slab_ptr, offset, need] {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t s = 0; s < slabs_.size(); ++s)
      if (slabs_[s].get() == slab_ptr) return release(s, offset, need);
  };
  return st;
}

void Arena::release(size_t slab, size_t offset, size_t bytes) {
  Slab& sl = *slabs_[slab];
  auto next = sl.free.lower_bound(offset);
  size_t start = offset, len = bytes;
  if (next != sl.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {  // merge with the range before
      start = prev->first;
      len += prev->second;
      sl.free.erase(prev);
    }
  }
  if (next != sl.free.end() && offset + bytes == next->first) {  // and the one after
    len += next->second;
    sl.free.erase(next);
  }
  sl.free.emplace(start, len);
  sl.live--;
  used_ -= bytes;
  live_--;
}

void Arena::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : slabs_) {
    if (s && s->live == 0) {
      STRATA_CUDA_CHECK(cudaFree(s->base));
      s.reset();
    }
  }
  std::erase(slabs_, nullptr);
}

void Arena::copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream_);
  if (dst_dev == Device::Cuda && src_dev == Device::Host) {
    // Pageable host memory: wait, so the caller may reuse its buffer at once.
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(s));
    h2d_++;
    h2d_b_ += static_cast<int64_t>(bytes);
  } else if (dst_dev == Device::Host && src_dev == Device::Cuda) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(s));
    d2h_++;
    d2h_b_ += static_cast<int64_t>(bytes);
  } else if (dst_dev == Device::Cuda && src_dev == Device::Cuda) {
    STRATA_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));  // stream-ordered
    d2d_++;
    d2d_b_ += static_cast<int64_t>(bytes);
  } else {
    fail("cuda arena: copy between two host buffers ({} bytes) does not belong here", bytes);
  }
}

void Arena::copy_h2d_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                    static_cast<cudaStream_t>(stream_)));
  h2d_++;
  h2d_b_ += static_cast<int64_t>(bytes);
}

void Arena::copy_d2h_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                    static_cast<cudaStream_t>(stream_)));
  d2h_++;
  d2h_b_ += static_cast<int64_t>(bytes);
}

ArenaStats Arena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ArenaStats st;
  for (const auto& s : slabs_)
    st.reserved_bytes += s->bytes;
  st.used_bytes = used_;
  st.peak_used_bytes = peak_;
  st.slabs = static_cast<int64_t>(slabs_.size());
  st.live_blocks = live_;
  return st;
}

CopyCounters Arena::copies() const {
  CopyCounters c;
  c.h2d = h2d_;
  c.d2h = d2h_;
  c.d2d = d2d_;
  c.h2d_bytes = h2d_b_;
  c.d2h_bytes = d2h_b_;
  c.d2d_bytes = d2d_b_;
  return c;
}

}  // namespace strata::cuda
#endif  // STRATA_HAVE_CUDA
