// The per-block gate: on the fake device of tests/common with every op bounced to the host,
// each block's device output equals the host output (error 0, in band); with one deliberately
// wrong "device" kernel (relu instead of relu²) exactly the blocks that use it fall out of band.
// Bands grow with each FP8 linear on the path and are tighter for f32 than for bf16.
#include <gtest/gtest.h>

#include <atomic>

#include "../common/fake_device.h"
#include "model/nemotron_h/block_gate.h"
#include "model_test_util.h"
#include "ops/ops.h"

namespace strata::model {
namespace {

#ifndef STRATA_HAVE_CUDA
// A wrong relu2 for the fake device (builds without CUDA only), off unless a test enables it.
std::atomic<bool> g_wrong_relu2{false};
bool wrong_relu2_supports(const ops::Relu2Args& a, std::string* why) {
  if (!g_wrong_relu2) {
    *why = "test kernel disabled";
    return false;
  }
  return a.x.device() == Device::Cuda;
}
void wrong_relu2_run(const ops::Relu2Args& a, OpContext&) {
  // relu without the square, on fake-device (host) memory; rows may be strided.
  for (int64_t t = 0; t < a.x.dim(0); ++t)
    for (int64_t i = 0; i < a.x.dim(1); ++i) {
      const float v =
          load_as_f32(a.x.raw(), a.x.dtype(), static_cast<size_t>(t * a.x.stride(0) + i));
      store_from_f32(a.out.raw(), a.out.dtype(), static_cast<size_t>(t * a.out.stride(0) + i),
                     v > 0 ? v : 0.f);
    }
}
STRATA_REGISTER_KERNEL(ops::Relu2Args, "test.wrong_relu2", Device::Cuda, wrong_relu2_supports,
                       wrong_relu2_run);
#endif

class Gate : public strata::test::FakeDeviceTest {
 protected:
  std::vector<BlockGateRow> run(NemotronHModel& m, const std::string& forced) {
    ops::set_forced_host_ops(forced);
    OpContext ctx;
    ctx.device = Device::Cuda;
    ctx.force_host_ops = ops::forced_host_ops();
    ctx.allow_host_bounce = true;
    auto rows = run_block_gate(m, ctx, {.prompt_len = 7, .seed = 3});
    ops::set_forced_host_ops("");
    return rows;
  }
};

TEST_F(Gate, BouncedDeviceEqualsHostInEveryBlock) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  auto m = testing::synthetic_model(c, 8);
  std::string all;
  for (const auto& n : ops::op_names())
    all += (all.empty() ? "" : ",") + n;
  const auto rows = run(*m, all);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), 2 * c.num_layers());
  int64_t elements = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r.rel_l2, 0.0) << "layer " << r.layer << " " << r.phase;
    EXPECT_TRUE(r.ok());
    elements += r.elements;
  }
  EXPECT_EQ(elements, c.num_layers() * (7 + 1) * c.hidden_size);
}

#ifndef STRATA_HAVE_CUDA
TEST_F(Gate, AWrongKernelFailsExactlyTheBlocksThatUseIt) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  auto m = testing::synthetic_model(c, 9);
  std::string all_but_relu2;
  for (const auto& n : ops::op_names())
    if (n != "relu2") all_but_relu2 += (all_but_relu2.empty() ? "" : ",") + n;
  g_wrong_relu2 = true;
  const auto rows = run(*m, all_but_relu2);
  g_wrong_relu2 = false;
  int64_t out = 0, checked = 0;
  for (const auto& r : rows) {
    const bool uses_relu2 = r.kind == LayerKind::Mlp || r.kind == LayerKind::Moe;
    EXPECT_EQ(!r.ok(), uses_relu2) << "layer " << r.layer << " " << r.phase << " rel " << r.rel_l2;
    out += r.ok() ? 0 : 1;
    ++checked;
  }
  EXPECT_EQ(checked, 2 * c.num_layers());
  EXPECT_EQ(out, 2 * (c.num_mlp + c.num_moe));
}
#endif

TEST(GateBands, GrowWithFp8LinearsAndPrecision) {
  for (LayerKind k : {LayerKind::Mamba, LayerKind::Attention, LayerKind::Mlp, LayerKind::Moe}) {
    EXPECT_LT(block_band(k, DType::F32, 0), block_band(k, DType::BF16, 0));
    // Each FP8 linear adds e4m3's unit roundoff 2^-4 (see block_gate.h).
    EXPECT_DOUBLE_EQ(block_band(k, DType::BF16, 2) - block_band(k, DType::BF16, 1),
                     std::ldexp(1.0, -4));
    EXPECT_LT(block_band(k, DType::BF16, 0), 0.1);
  }
}

}  // namespace
}  // namespace strata::model
