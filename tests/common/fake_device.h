// A stand-in for a device on machines without one: memory that is host memory, registered as
// the DeviceAllocator of Device::Cuda, so device code paths that only move bytes (the host
// bounce, weight residency, caches on the device) run for real: every copy is a memcpy through
// the allocator interface and counted. Installed only while no real backend is.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/check.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::test {

class FakeDevice final : public DeviceAllocator {
 public:
  std::shared_ptr<Storage> allocate(size_t bytes) override {
    auto s = std::make_shared<Storage>();
    s->data = std::malloc(bytes == 0 ? 1 : bytes);
    s->bytes = bytes;
    s->device = Device::Cuda;
    void* p = s->data;
    s->release = [p] { std::free(p); };
    return s;
  }
  void copy(void* dst, Device, const void* src, Device, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    ++copies;
  }
  int copies = 0;
};

// Fixture base: installs a FakeDevice for Device::Cuda for one test, or skips the test when a
// real device backend is installed in this process (then the GPU tests cover these paths).
class FakeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      device_allocator(Device::Cuda);
      GTEST_SKIP()
          << "a real device backend is installed in this process; the fake device is not needed";
    } catch (const Error&) {
    }
    // A machine with a real device: code under test may start the real backend (an executor
    // prepares its device), which must not meet a fake one; the GPU tests cover these paths.
    std::string why;
    if (cuda::device_available(&why))
      GTEST_SKIP() << "a CUDA device is available; the fake device is not used where a real one is";
    set_device_allocator(Device::Cuda, &fake_);
    installed_ = true;
  }
  void TearDown() override {
    if (installed_) set_device_allocator(Device::Cuda, nullptr);
  }
  FakeDevice fake_;
  bool installed_ = false;
};

}  // namespace strata::test
