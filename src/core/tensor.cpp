#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

namespace strata {

std::string_view device_name(Device d) {
  return d == Device::Host ? "host" : "cuda";
}

namespace {
DeviceAllocator* g_allocators[2] = {nullptr, nullptr};
// A thread's override (a device context made current on it: cuda::ContextScope).
thread_local DeviceAllocator* t_allocators[2] = {nullptr, nullptr};

std::array<int64_t, kMaxDims> contiguous_strides(const Shape& s) {
  std::array<int64_t, kMaxDims> st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[static_cast<size_t>(i)] = acc;
    acc *= s[i];
  }
  return st;
}
}  // namespace

void set_device_allocator(Device d, DeviceAllocator* alloc) {
  g_allocators[static_cast<int>(d)] = alloc;
}

DeviceAllocator* set_thread_device_allocator(Device d, DeviceAllocator* alloc) {
  DeviceAllocator* prev = t_allocators[static_cast<int>(d)];
  t_allocators[static_cast<int>(d)] = alloc;
  return prev;
}

DeviceAllocator* device_allocator(Device d) {
  auto* a = t_allocators[static_cast<int>(d)];
  if (!a) a = g_allocators[static_cast<int>(d)];
  if (!a) fail("no {} backend is available in this build or on this machine", device_name(d));
  return a;
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  STRATA_CHECK_LE(static_cast<int>(dims.size()), kMaxDims);
  for (int64_t d : dims)
    dims_[static_cast<size_t>(rank_++)] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  STRATA_CHECK_LE(static_cast<int>(dims.size()), kMaxDims);
  for (int64_t d : dims)
    dims_[static_cast<size_t>(rank_++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i)
    n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i)
    s += (i ? ", " : "") + std::to_string(dims_[static_cast<size_t>(i)]);
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int i = 0; i < shape.rank(); ++i)
    STRATA_CHECK_GE(shape[i], 0);
  Tensor t;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  if (device == Device::Host) {
    auto st = std::make_shared<Storage>();
    const size_t rounded = (bytes + 63) / 64 * 64;
    st->data = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!st->data) fail("out of host memory allocating {} bytes", bytes);
    st->bytes = bytes;
    st->device = Device::Host;
    void* p = st->data;
    st->release = [p] { std::free(p); };
    t.storage_ = std::move(st);
  } else {
    t.storage_ = device_allocator(device)->allocate(bytes);
  }
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device == Device::Host) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
    Tensor h = empty(shape, dtype, Device::Host);
    std::memset(h.raw(), 0, h.nbytes());
    t.copy_from(h);
  }
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device,
                    std::shared_ptr<void> keepalive) {
  Tensor t;
  auto st = std::make_shared<Storage>();
  st->data = data;
  st->bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  st->device = device;
  if (keepalive) st->release = [k = std::move(keepalive)]() mutable { k.reset(); };
  t.storage_ = std::move(st);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

bool Tensor::is_contiguous() const {
  return strides_ == contiguous_strides(shape_) || numel() <= 1;
}

Tensor Tensor::reshape(const Shape& shape) const {
  STRATA_CHECK(is_contiguous(), "reshape of a non-contiguous tensor {}", str());
  STRATA_CHECK_EQ(shape.numel(), numel());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::slice(int d, int64_t start, int64_t len) const {
  if (d < 0) d += rank();
  STRATA_CHECK(d >= 0 && d < rank(), "slice dim {} of {}", d, str());
  STRATA_CHECK(start >= 0 && len >= 0 && start + len <= dim(d), "slice [{}, +{}) of dim {} in {}",
               start, len, d, str());
  Tensor t = *this;
  t.offset_bytes_ +=
      static_cast<size_t>(start * strides_[static_cast<size_t>(d)]) * dtype_size(dtype_);
  t.shape_[d] = len;
  return t;
}

Tensor Tensor::select(int64_t index) const {
  STRATA_CHECK_GE(rank(), 1);
  Tensor s = slice(0, index, 1);
  std::vector<int64_t> dims = shape_.vec();
  dims.erase(dims.begin());
  Tensor t = s;
  t.shape_ = Shape(dims);
  for (int i = 0; i + 1 < kMaxDims; ++i)
    t.strides_[static_cast<size_t>(i)] = strides_[static_cast<size_t>(i + 1)];
  return t;
}

Tensor Tensor::with_shape_strides(const Shape& shape,
                                  const std::array<int64_t, kMaxDims>& strides) const {
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = strides;
  return t;
}

Tensor Tensor::to(Device device) const {
  STRATA_CHECK(is_contiguous(), "to({}) of a non-contiguous tensor {}", device_name(device), str());
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  STRATA_CHECK(device() == Device::Host, "contiguous() on device tensor {}", str());
  Tensor t = empty(shape_, dtype_, Device::Host);
  const size_t es = dtype_size(dtype_);
  const int64_t n = numel();
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < rank(); ++d)
      off += idx[static_cast<size_t>(d)] * strides_[static_cast<size_t>(d)];
    std::memcpy(static_cast<char*>(t.raw()) + static_cast<size_t>(i) * es,
                static_cast<const char*>(raw()) + static_cast<size_t>(off) * es, es);
    for (int d = rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape_[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  STRATA_CHECK(dtype_ == src.dtype_ && shape_ == src.shape_, "copy_from {} into {}", src.str(),
               str());
  STRATA_CHECK(is_contiguous() && src.is_contiguous(),
               "copy_from needs contiguous tensors: {} -> {}", src.str(), str());
  if (device() == Device::Host && src.device() == Device::Host) {
    std::memmove(raw(), src.raw(), nbytes());
    return;
  }
  const Device dev = device() != Device::Host ? device() : src.device();
  device_allocator(dev)->copy(raw(), device(), src.raw(), src.device(), nbytes());
}

std::string Tensor::str() const {
  return fmt::format("{}{}@{}", dtype_name(dtype_), shape_.str(), device_name(device()));
}

}  // namespace strata
