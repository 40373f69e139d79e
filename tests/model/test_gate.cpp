// The per-block gate: on the fake device of tests/common with every op bounced to the host,
// each block's device output equals the host output (error 0, in band); with one deliberately
// wrong "device" kernel (relu instead of relu²) exactly the blocks that use it fall out of band;
// with injected defects on the device side (a 1% scale, and every input of the blocks' output
// linears one bf16 ulp too large) every block falls out of band. The bf16 bands come from the
// measured host rounding of each block. These run in every build (the fake device stands in
// where no real device backend is installed: CPU builds, CUDA builds on a machine without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "../common/fake_device.h"
#include "model/nemotron_h/block_gate.h"
#include "model_test_util.h"
#include "ops/ops.h"

namespace strata::model {
namespace {

// A wrong "device" relu2 (relu without the square), made by the device-side observer: relu2's
// input is replaced by sqrt(max(x, 0)), whose relu² is relu(x). Every op runs through the host
// bounce, so this works in every build.
std::function<void(const char*, const void*)> relu_instead_of_relu2() {
  return [](const char* op, const void* args) {
    if (std::string(op) != ops::Relu2Args::kName) return;
    auto* a = const_cast<ops::Relu2Args*>(static_cast<const ops::Relu2Args*>(args));
    const Tensor h = a->x.to(Device::Host);  // rows may be strided: keep the layout
    Tensor out = Tensor::empty(Shape{h.dim(0), h.dim(1)}, h.dtype(), Device::Host);
    for (int64_t t = 0; t < h.dim(0); ++t)
      for (int64_t i = 0; i < h.dim(1); ++i) {
        const float v = load_as_f32(h.raw(), h.dtype(), static_cast<size_t>(t * h.stride(0) + i));
        store_from_f32(out.raw(), out.dtype(), static_cast<size_t>(t * h.dim(1) + i),
                       v > 0.f ? std::sqrt(v) : 0.f);
      }
    a->x = out.to(a->x.device());
  };
}

// A device-side defect: every linear writing the hidden width (each block's output projection;
// in the tiny model also q_proj, whose width equals it) multiplies `factor` times its input, and
// so does the routed experts' combination (their routing weights): the block's output is scaled
// by `factor`. Tensors are replaced by scaled copies, rounded to their dtype.
Tensor scaled_copy(const Tensor& t, double factor) {
  const Tensor h = t.to(Device::Host).contiguous();
  Tensor out = Tensor::empty(h.shape(), h.dtype(), Device::Host);
  for (int64_t i = 0; i < h.numel(); ++i)
    store_from_f32(
        out.raw(), out.dtype(), static_cast<size_t>(i),
        static_cast<float>(load_as_f32(h.raw(), h.dtype(), static_cast<size_t>(i)) * factor));
  return out.to(t.device());
}

std::function<void(const char*, const void*)> scale_defect(int64_t hidden, double factor) {
  return [hidden, factor](const char* op, const void* args) {
    const std::string name(op);
    if (name == ops::LinearArgs::kName) {
      auto* a = const_cast<ops::LinearArgs*>(static_cast<const ops::LinearArgs*>(args));
      if (a->out.dim(1) == hidden) a->x = scaled_copy(a->x, factor);
    } else if (name == ops::MoeExpertsArgs::kName) {
      auto* a = const_cast<ops::MoeExpertsArgs*>(static_cast<const ops::MoeExpertsArgs*>(args));
      a->weights = scaled_copy(a->weights, factor);
    }
  };
}

class Gate : public strata::test::FakeDeviceTest {
 protected:
  std::vector<BlockGateRow> run(NemotronHModel& m, const std::string& forced,
                                std::function<void(const char*, const void*)> defect = {},
                                int64_t prompt_len = 7) {
    ops::set_forced_host_ops(forced);
    OpContext ctx;
    ctx.device = Device::Cuda;
    ctx.force_host_ops = ops::forced_host_ops();
    ctx.allow_host_bounce = true;
    ctx.observer = std::move(defect);
    auto rows = run_block_gate(m, ctx, {.prompt_len = prompt_len, .seed = 3});
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
    // The measured rounding of a bf16 block: present, and at the size of bf16 roundings.
    EXPECT_GT(r.rounding, std::ldexp(1.0, -12)) << "layer " << r.layer << " " << r.phase;
    EXPECT_LT(r.rounding, 0.05) << "layer " << r.layer << " " << r.phase;
    EXPECT_DOUBLE_EQ(r.band, block_band(r.kind, DType::BF16, 0, r.rounding));
    EXPECT_GT(r.scale_band, 0.0);
    EXPECT_LT(r.scale_band, r.band);
    elements += r.elements;
  }
  EXPECT_EQ(elements, c.num_layers() * (7 + 1) * c.hidden_size);
}

std::string all_ops() {
  std::string all;
  for (const auto& n : ops::op_names())
    all += (all.empty() ? "" : ",") + n;
  return all;
}

// Defects a gate must see: a 1% scale, and one bf16 ulp on every input of the output linears
// (x (1 + 2^-8) rounds every bf16 value one ulp away from zero: ulp / |x| is in (2^-8, 2^-7]).
// Both are near the size of bf16 rounding in relative L2, which a correct device reaches too;
// the scale component gives them away.
TEST_F(Gate, InjectedScaleAndOneUlpDefectsAreOutOfBandInEveryBlock) {
  // Block outputs of real models have thousands of elements; 256 keeps one decode token's
  // scale component well resolved (the scale band shrinks as 1 / sqrt(elements)). A prompt of 40
  // tokens: the rounding is measured on its first 32 (block_gate.h).
  ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  c.hidden_size = 256;
  c.finalize();
  auto m = testing::synthetic_model(c, 10);
  int64_t checked = 0;
  for (const double factor : {1.01, 1.0 + std::ldexp(1.0, -8)}) {
    SCOPED_TRACE(fmt::format("factor {}", factor));
    const auto rows = run(*m, all_ops(), scale_defect(c.hidden_size, factor), 40);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), 2 * c.num_layers());
    for (const auto& r : rows) {
      EXPECT_FALSE(r.ok()) << "layer " << r.layer << " " << r.phase << ": rel " << r.rel_l2
                           << " band " << r.band << ", scale " << r.scale << " band "
                           << r.scale_band;
      std::printf(
          "[gate] defect x%.5f layer %lld %s: rel %.3g band %.3g (rounding %.3g), scale %.3g band "
          "%.3g\n",
          factor, static_cast<long long>(r.layer), r.phase.c_str(), r.rel_l2, r.band, r.rounding,
          r.scale, r.scale_band);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * c.num_layers());
}

TEST_F(Gate, AWrongKernelFailsExactlyTheBlocksThatUseIt) {
  const ModelConfig c = testing::tiny_hybrid_config(DType::BF16);
  auto m = testing::synthetic_model(c, 9);
  const auto rows = run(*m, all_ops(), relu_instead_of_relu2());
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

TEST(GateBands, MeasuredForBf16AndGrowWithFp8Linears) {
  for (LayerKind k : {LayerKind::Mamba, LayerKind::Attention, LayerKind::Mlp, LayerKind::Moe}) {
    // bf16: twice the measured rounding, never below half a bf16 ulp (2^-9).
    EXPECT_DOUBLE_EQ(block_band(k, DType::BF16, 0, 0.003), 0.006);
    EXPECT_DOUBLE_EQ(block_band(k, DType::BF16, 0, 0.0), std::ldexp(1.0, -9));
    EXPECT_LT(block_band(k, DType::F32, 0, 0.0), block_band(k, DType::BF16, 0, 0.0));
    // Each FP8 linear whose quantization is not emulated adds e4m3's unit roundoff 2^-4.
    EXPECT_DOUBLE_EQ(block_band(k, DType::BF16, 2, 0.003) - block_band(k, DType::BF16, 1, 0.003),
                     std::ldexp(1.0, -4));
    EXPECT_DOUBLE_EQ(block_band(k, DType::F32, 1, 0.0) - block_band(k, DType::F32, 0, 0.0),
                     std::ldexp(1.0, -4));
  }
}

}  // namespace
}  // namespace strata::model
