// Tensor: a typed, strided view of bytes that live on the host or on a device.
// Storage is shared and reference-counted; views (slice, reshape) share it. A tensor never
// owns a copy implicitly: copies are explicit ops. Shapes are row-major by default.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace strata {

enum class Device : uint8_t { Host, Cuda };
std::string_view device_name(Device d);

// A block of bytes and how to give it back. For mmapped weights `release` keeps the mapping
// alive; for arena memory it returns the block to the arena.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::Host;
  std::function<void()> release;
  ~Storage() {
    if (release) release();
  }
};

// Allocator for device memory, installed by a device backend (src/ops/cuda). Host memory is
// allocated directly (64-byte aligned).
struct DeviceAllocator {
  virtual ~DeviceAllocator() = default;
  virtual std::shared_ptr<Storage> allocate(size_t bytes) = 0;
  // Copies between host and device or within a device. Counted by the backend.
  virtual void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) = 0;
};
// The process-wide allocator for d (the backend's default context).
void set_device_allocator(Device d, DeviceAllocator* alloc);
// This thread's allocator for d, in front of the process-wide one (nullptr: none); returns the
// previous one. A device context made current on a thread installs its arena here.
DeviceAllocator* set_thread_device_allocator(Device d, DeviceAllocator* alloc);
// This thread's allocator for d, else the process-wide one; throws when neither is installed.
DeviceAllocator* device_allocator(Device d);

constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {dims_.begin(), dims_.begin() + rank_}; }
  std::string str() const;  // "[2, 3]"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // Fresh, uninitialized, contiguous memory.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::Host);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::Host);
  // A view of memory owned elsewhere; `keepalive` (may be null) is held as long as the view.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device,
                     std::shared_ptr<void> keepalive);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::Host; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  void* raw() const { return static_cast<char*>(storage_->data) + offset_bytes_; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Views sharing storage.
  Tensor reshape(const Shape& shape) const;                 // needs contiguous
  Tensor slice(int dim, int64_t start, int64_t len) const;  // along one dimension
  Tensor select(int64_t index) const;                       // drops dim 0
  Tensor with_shape_strides(const Shape& shape, const std::array<int64_t, kMaxDims>& strides) const;

  // Explicit copies.
  Tensor to(Device device) const;     // contiguous copy on `device`
  Tensor contiguous() const;          // host only: contiguous copy if not already
  void copy_from(const Tensor& src);  // same dtype and shape; any devices; contiguous both

  std::string str() const;  // "bf16[2, 3]@host"
  const std::shared_ptr<Storage>& storage() const { return storage_; }

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};  // in elements
};

}  // namespace strata
