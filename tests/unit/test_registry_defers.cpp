// find_kernel's choice with Kernel::defers: a supporting kernel that defers gives way to a later
// supporting kernel, and runs only when no later one supports the arguments.
#include <gtest/gtest.h>

#include <string>

#include "ops/cuda/ssm.h"
#include "ops/registry.h"

namespace strata {
namespace {

// A private op: its own kernel table, filled by the test.
struct FakeArgs {
  int size = 0;
};

bool supports_all(const FakeArgs&, std::string*) {
  return true;
}
bool supports_small(const FakeArgs& a, std::string* why) {
  if (a.size < 100) return true;
  *why = "size 100 and up";
  return false;
}
bool defers_when_large(const FakeArgs& a) {
  return a.size >= 10;
}
void run_nothing(const FakeArgs&, OpContext&) {}

class RegistryDefers : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& k = OpTable<FakeArgs>::kernels();
    k.clear();
    // "first" defers for sizes 10 and up; "second" takes sizes below 100; "third" everything.
    k.push_back({"first", Device::Cuda, supports_all, run_nothing, defers_when_large});
    k.push_back({"second", Device::Cuda, supports_small, run_nothing});
    k.push_back({"host", Device::Host, supports_all, run_nothing});
  }
  void TearDown() override { OpTable<FakeArgs>::kernels().clear(); }
  static std::string pick(int size) {
    std::string reasons;
    const Kernel<FakeArgs>* k = find_kernel(FakeArgs{size}, Device::Cuda, &reasons);
    return k == nullptr ? "none:" + reasons : k->name;
  }
};

TEST_F(RegistryDefers, KernelThatDoesNotDeferRunsFirst) {
  EXPECT_EQ(pick(3), "first");
}

TEST_F(RegistryDefers, DeferringKernelGivesWayToALaterSupportingOne) {
  EXPECT_EQ(pick(10), "second");
  EXPECT_EQ(pick(99), "second");
}

TEST_F(RegistryDefers, DeferringKernelRunsWhenNoLaterOneSupports) {
  EXPECT_EQ(pick(100), "first");
}

TEST_F(RegistryDefers, OtherDevicesKernelsAreNotCandidates) {
  OpTable<FakeArgs>::kernels().erase(OpTable<FakeArgs>::kernels().begin() + 1);  // "second"
  EXPECT_EQ(pick(50), "first");  // the host kernel also supports 50 but is not a Cuda kernel
}

// The scan's rule (cuda.ssd_wg defers to cuda.ssd_seq), at the bench-kernels shapes it was
// measured on: Nano-3 has 64 heads, 9B-v2 128, the H200 132 SMs.
TEST(ScanSeqPreferred, FewLongSequencesOnly) {
  const int64_t sms = 132;
  EXPECT_TRUE(cuda::ssm_scan_seq_preferred(2048, 1, 64, sms));
  EXPECT_TRUE(cuda::ssm_scan_seq_preferred(512, 1, 128, sms));
  EXPECT_TRUE(cuda::ssm_scan_seq_preferred(8 * 512, 8, 64, sms));    // 512 blocks <= 528
  EXPECT_FALSE(cuda::ssm_scan_seq_preferred(8 * 512, 8, 128, sms));  // 1,024 blocks
  EXPECT_FALSE(cuda::ssm_scan_seq_preferred(16 * 128, 16, 64, sms));
  EXPECT_FALSE(cuda::ssm_scan_seq_preferred(128, 1, 64, sms));  // one chunk
  EXPECT_TRUE(cuda::ssm_scan_seq_preferred(256, 1, 64, sms));   // two chunks
  EXPECT_FALSE(cuda::ssm_scan_seq_preferred(0, 0, 64, sms));
}

}  // namespace
}  // namespace strata
