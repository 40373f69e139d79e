#include "ops/side_branch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ops/cuda/device_context.h"

namespace strata::ops {
namespace {

// Allocates through `inner` and keeps every block until the branch joins.
class KeepAlive final : public DeviceAllocator {
 public:
  KeepAlive(DeviceAllocator* inner, std::vector<std::shared_ptr<Storage>>* kept)
      : inner_(inner), kept_(kept) {}
  std::shared_ptr<Storage> allocate(size_t bytes) override {
    std::shared_ptr<Storage> s = inner_->allocate(bytes);
    kept_->push_back(s);
    return s;
  }
  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override {
    inner_->copy(dst, dst_dev, src, src_dev, bytes);
  }

 private:
  DeviceAllocator* inner_;
  std::vector<std::shared_ptr<Storage>>* kept_;
};

std::atomic<int64_t> g_overlapped{0};

}  // namespace

int64_t side_branches_overlapped() {
  return g_overlapped.load();
}

bool side_streams_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_NO_SIDE_STREAM");
    return !(e && std::strcmp(e, "1") == 0);
  }();
  return on;
}

SideBranch::SideBranch(OpContext& ctx) : ctx_(ctx) {
  const bool overlap = ctx.device == Device::Cuda && ctx.device_context && ctx.stream &&
                       !ctx.observer && !ctx.allow_host_bounce && side_streams_enabled();
  if (!overlap) return;
  auto& dc = *static_cast<cuda::DeviceContext*>(ctx.device_context);
  side_ = dc.side_stream();
  dc.fork_side(ctx.stream);
  ++g_overlapped;
}

void SideBranch::run(const std::function<void()>& work) {
  if (!side_) {
    work();
    return;
  }
  void* step_stream = ctx_.stream;
  DeviceAllocator* prev = set_thread_device_allocator(Device::Cuda, nullptr);
  KeepAlive keep(prev ? prev : device_allocator(Device::Cuda), &kept_);
  set_thread_device_allocator(Device::Cuda, &keep);
  ctx_.stream = side_;
  try {
    work();
  } catch (...) {
    ctx_.stream = step_stream;
    set_thread_device_allocator(Device::Cuda, prev);
    throw;
  }
  ctx_.stream = step_stream;
  set_thread_device_allocator(Device::Cuda, prev);
}

void SideBranch::join() {
  if (joined_) return;
  joined_ = true;
  if (side_) static_cast<cuda::DeviceContext*>(ctx_.device_context)->join_side(ctx_.stream);
  kept_.clear();  // later ops on the step stream are ordered after the side work
}

SideBranch::~SideBranch() {
  try {
    join();
  } catch (...) {
  }
}

}  // namespace strata::ops
