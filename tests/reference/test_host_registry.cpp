// Every op of the op table has a host (reference) kernel, found by the registry at load time.
#include <gtest/gtest.h>

#include "ops/ops.h"

namespace strata::ops {
namespace {

template <class... Args>
int count_host_kernels() {
  int n = 0;
  ((n += has_kernel<Args>(Device::Host) ? 1 : 0), ...);
  return n;
}

TEST(HostRegistry, EveryOpHasAHostKernel) {
  EXPECT_TRUE(has_kernel<EmbeddingArgs>(Device::Host));
  EXPECT_TRUE(has_kernel<SsmScanArgs>(Device::Host));
  EXPECT_TRUE(has_kernel<SampleArgs>(Device::Host));
  EXPECT_EQ((count_host_kernels<EmbeddingArgs, RmsNormArgs, LinearArgs, Conv1dPrefillArgs,
                                Conv1dUpdateArgs, SsmScanArgs, SsmUpdateArgs, GatedRmsNormArgs,
                                KvCacheWriteArgs, AttentionArgs, Relu2Args, AddArgs, MoeRouteArgs,
                                MoeExpertsArgs, CastArgs, SampleArgs>()),
            16);
}

TEST(HostRegistry, MissingArgumentsAreReportedNotCrashed) {
  OpContext ctx;
  LinearArgs a;  // nothing set
  try {
    run(ctx, a);
    FAIL() << "empty arguments accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is not given"), std::string::npos) << e.what();
  }
}

template <class... Args>
int count_rejected_empty() {
  int n = 0;
  OpContext ctx;
  auto one = [&](auto args) {
    try {
      run(ctx, args);
    } catch (const Error&) {
      ++n;
    }
  };
  (one(Args{}), ...);
  return n;
}

// Default-constructed arguments (no tensors at all) fail with an Error for every op.
TEST(HostRegistry, EveryOpRejectsEmptyArguments) {
  EXPECT_EQ((count_rejected_empty<EmbeddingArgs, RmsNormArgs, LinearArgs, Conv1dPrefillArgs,
                                  Conv1dUpdateArgs, SsmScanArgs, SsmUpdateArgs, GatedRmsNormArgs,
                                  KvCacheWriteArgs, AttentionArgs, Relu2Args, AddArgs, MoeRouteArgs,
                                  MoeExpertsArgs, CastArgs, SampleArgs>()),
            16);
}

}  // namespace
}  // namespace strata::ops
