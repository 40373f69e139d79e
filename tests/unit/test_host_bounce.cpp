// The host bounce (ops::run on a device context): forced ops and ops without a device kernel
// run on their host kernels with device tensors copied to the host and outputs copied back,
// counted and refused unless allowed. Without a GPU the "device" is a host-memory allocator
// registered for Device::Cuda, so the copies are real memcpys through the DeviceAllocator
// interface, and strided row views exercise the span copies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../common/fake_device.h"
#include "core/check.h"
#include "ops/ops.h"

namespace strata::ops {
namespace {

class BounceTest : public test::FakeDeviceTest {
 protected:
  static Tensor random_device(const Shape& s, DType dt, uint64_t seed) {
    Tensor h = Tensor::empty(s, dt);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t i = 0; i < h.numel(); ++i)
      store_from_f32(h.raw(), dt, static_cast<size_t>(i), nd(rng));
    return h.to(Device::Cuda);
  }
};

TEST_F(BounceTest, ForcedOpRunsOnHostWithStridedViewsAndCountsTransfers) {
  // x is a [5, 7] row view (row stride 11) into a wider device tensor; the gap columns must
  // come back untouched.
  const Tensor parent = random_device(Shape{5, 11}, DType::F32, 1);
  const Tensor parent_before = Tensor::empty(Shape{5, 11}, DType::F32);
  std::memcpy(parent_before.raw(), parent.raw(), parent.nbytes());
  Relu2Args a;
  a.x = parent.slice(1, 2, 7);
  a.out = Tensor::empty(Shape{5, 7}, DType::F32, Device::Cuda);
  std::fill_n(a.out.data<float>(), 35, std::nanf(""));  // poison
  OpContext ctx;
  ctx.device = Device::Cuda;
  ctx.force_host_ops = {"relu2"};
  ctx.allow_host_bounce = true;
  run(ctx, a);
  EXPECT_EQ(ctx.host_bounces.load(), 1);
  EXPECT_EQ(ctx.d2h_copies.load(), 2);  // x and out go down
  EXPECT_EQ(ctx.h2d_copies.load(), 1);  // only out comes back
  int64_t compared = 0;
  for (int64_t t = 0; t < 5; ++t) {
    for (int64_t c = 0; c < 7; ++c, ++compared) {
      const double x = parent_before.data<float>()[t * 11 + 2 + c];
      const float want =
          static_cast<float>(x > 0 ? x * x : 0.0);  // one rounding of an exact product
      EXPECT_EQ(a.out.data<float>()[t * 7 + c], want) << t << "," << c;
    }
  }
  EXPECT_EQ(compared, 35);
  EXPECT_EQ(std::memcmp(parent.raw(), parent_before.raw(), parent.nbytes()), 0);  // input untouched
}

TEST_F(BounceTest, StridedOutputKeepsItsGaps) {
  // out is a column range of a wider device tensor: the bounce writes the span back, and the
  // columns outside the view must keep their values.
  const Tensor x = random_device(Shape{4, 6}, DType::F32, 2);
  const Tensor wide = random_device(Shape{4, 10}, DType::F32, 3);
  const Tensor before = Tensor::empty(Shape{4, 10}, DType::F32);
  std::memcpy(before.raw(), wide.raw(), wide.nbytes());
  Relu2Args a;
  a.x = x;
  a.out = wide.slice(1, 3, 6);
  OpContext ctx;
  ctx.device = Device::Cuda;
  ctx.force_host_ops = {"relu2"};
  ctx.allow_host_bounce = true;
  run(ctx, a);
  int64_t gaps = 0, written = 0;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < 10; ++c) {
      const float v = wide.data<float>()[t * 10 + c];
      if (c >= 3 && c < 9) {
        const float xv = x.data<float>()[t * 6 + c - 3];
        EXPECT_EQ(v, xv > 0 ? xv * xv : 0.f);
        ++written;
      } else {
        EXPECT_EQ(v, before.data<float>()[t * 10 + c]);
        ++gaps;
      }
    }
  EXPECT_EQ(written, 24);
  EXPECT_EQ(gaps, 16);
}

TEST_F(BounceTest, LinearBounceEqualsTheHostKernelBitForBit) {
  // bf16 weight on the device: the bounced result must be exactly what the host kernel gives
  // on host copies (the bounce adds nothing but copies).
  LinearArgs dev;
  dev.x = random_device(Shape{3, 33}, DType::BF16, 4);
  dev.w.weight = random_device(Shape{17, 33}, DType::BF16, 5);
  dev.out = Tensor::empty(Shape{3, 17}, DType::BF16, Device::Cuda);
  OpContext ctx;
  ctx.device = Device::Cuda;
  ctx.force_host_ops = {"linear"};
  ctx.allow_host_bounce = true;
  run(ctx, dev);

  LinearArgs host;
  host.x = Tensor::empty(dev.x.shape(), DType::BF16);
  std::memcpy(host.x.raw(), dev.x.raw(), dev.x.nbytes());
  host.w.weight = Tensor::empty(dev.w.weight.shape(), DType::BF16);
  std::memcpy(host.w.weight.raw(), dev.w.weight.raw(), dev.w.weight.nbytes());
  host.out = Tensor::empty(Shape{3, 17}, DType::BF16);
  OpContext hctx;
  run(hctx, host);
  EXPECT_EQ(std::memcmp(host.out.raw(), dev.out.raw(), host.out.nbytes()), 0);
  EXPECT_EQ(ctx.host_bounces.load(), 1);
  EXPECT_EQ(hctx.host_bounces.load(), 0);
}

TEST_F(BounceTest, RefusedUnlessAllowed) {
  Relu2Args a;
  a.x = random_device(Shape{2, 3}, DType::F32, 6);
  a.out = Tensor::empty(Shape{2, 3}, DType::F32, Device::Cuda);
  OpContext forced;
  forced.device = Device::Cuda;
  forced.force_host_ops = {"relu2"};
  try {
    run(forced, a);
    FAIL() << "a forced op bounced without permission";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu2"), std::string::npos) << e.what();
  }
  // No device kernel is registered for this fake device: an error naming the op, unless
  // bounces are allowed.
  OpContext plain;
  plain.device = Device::Cuda;
  if (has_kernel<Relu2Args>(Device::Cuda)) GTEST_SKIP() << "this build registers device kernels";
  try {
    run(plain, a);
    FAIL() << "an op without a device kernel ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op relu2 has no cuda kernel"), std::string::npos)
        << e.what();
  }
  OpContext allowed;
  allowed.device = Device::Cuda;
  allowed.allow_host_bounce = true;
  run(allowed, a);
  EXPECT_EQ(allowed.host_bounces.load(), 1);
  EXPECT_EQ(forced.host_bounces.load() + plain.host_bounces.load(), 0);
}

TEST(OpObserver, SeesEveryOpWithItsArguments) {
  Relu2Args a;
  a.x = Tensor::empty(Shape{1, 4}, DType::F32);
  for (int i = 0; i < 4; ++i)
    a.x.data<float>()[i] = static_cast<float>(i) - 1.5f;
  a.out = Tensor::empty(Shape{1, 4}, DType::F32);
  OpContext ctx;
  std::vector<std::string> seen;
  const void* args_seen = nullptr;
  ctx.observer = [&](const char* op, const void* args) {
    seen.emplace_back(op);
    args_seen = args;
  };
  run(ctx, a);
  run(ctx, a);
  EXPECT_EQ(seen, (std::vector<std::string>{"relu2", "relu2"}));
  EXPECT_EQ(args_seen, &a);
}

}  // namespace
}  // namespace strata::ops
