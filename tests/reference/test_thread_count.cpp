// Host kernels give the same bits for any number of pool threads: every output element is
// computed by one thread in a fixed order. Each op runs with 1 and with 3 threads on the same
// random inputs; outputs and states are compared byte for byte.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "reference_util.h"

namespace strata::reftest {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() &&
         std::memcmp(a.contiguous().raw(), b.contiguous().raw(), a.nbytes()) == 0;
}

// Runs `make_and_run(out_tensors)` under 1 and 3 threads and compares what it returns.
template <class F>
void expect_thread_independent(const char* op, F&& make_and_run) {
  set_host_threads(1);
  const std::vector<Tensor> one = make_and_run();
  set_host_threads(3);
  const std::vector<Tensor> three = make_and_run();
  set_host_threads(default_host_threads());
  ASSERT_EQ(one.size(), three.size());
  int64_t compared = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(same_bytes(one[i], three[i])) << op << " output " << i;
    compared += one[i].numel();
  }
  EXPECT_GT(compared, 0);
}

TEST(HostThreadCount, LinearIsBitIdentical) {
  expect_thread_independent("linear", [] {
    std::mt19937_64 rng(600);
    ops::LinearArgs a;
    a.x = random_tensor({13, 70}, DType::BF16, rng);
    a.w.weight = random_tensor({97, 70}, DType::BF16, rng, 0.1);
    a.out = Tensor::empty({13, 97}, DType::BF16);
    OpContext ctx;
    ops::run(ctx, a);
    return std::vector<Tensor>{a.out};
  });
}

TEST(HostThreadCount, SsmScanIsBitIdentical) {
  expect_thread_independent("ssm_scan", [] {
    std::mt19937_64 rng(601);
    const int64_t T = 45, Hm = 6, P = 4, G = 2, N = 8;
    ops::SsmScanArgs a;
    a.x = random_tensor({T, Hm * P}, DType::F32, rng);
    a.dt_raw = random_tensor({T, Hm}, DType::F32, rng);
    a.A = Tensor::empty({Hm}, DType::F32);
    fill_uniform(a.A, rng, -2.0, -0.3);
    a.B = random_tensor({T, G * N}, DType::F32, rng);
    a.C = random_tensor({T, G * N}, DType::F32, rng);
    a.D = random_tensor({Hm}, DType::F32, rng);
    a.dt_bias = random_tensor({Hm}, DType::F32, rng);
    a.ssm_states = random_tensor({3, Hm, P, N}, DType::F32, rng);
    a.cu_seqlens = i32_tensor({0, 20, 21, 45});
    a.slots = i32_tensor({2, 0, 1});
    a.has_initial = i32_tensor({1, 0, 1});
    a.heads = Hm;
    a.head_dim = P;
    a.groups = G;
    a.state_size = N;
    a.chunk_size = 8;
    a.out = Tensor::empty({T, Hm * P}, DType::F32);
    OpContext ctx;
    ops::run(ctx, a);
    return std::vector<Tensor>{a.out, a.ssm_states};
  });
}

TEST(HostThreadCount, AttentionIsBitIdentical) {
  expect_thread_independent("attention", [] {
    std::mt19937_64 rng(602);
    ops::AttentionArgs a;
    a.q = random_tensor({9, 4 * 8}, DType::BF16, rng);
    a.k_cache = random_tensor({8, 4, 2, 8}, DType::BF16, rng);
    a.v_cache = random_tensor({8, 4, 2, 8}, DType::BF16, rng);
    a.block_tables = i32_tensor({3, 1, 6, 0, 2, 5, 7, 4}).reshape({2, 4});
    a.cu_seqlens_q = i32_tensor({0, 1, 9});
    a.context_lens = i32_tensor({13, 16});
    a.n_heads = 4;
    a.n_kv_heads = 2;
    a.head_dim = 8;
    a.max_q_len = 8;
    a.scale = 0.3f;
    a.out = Tensor::empty({9, 32}, DType::BF16);
    OpContext ctx;
    ops::run(ctx, a);
    return std::vector<Tensor>{a.out};
  });
}

TEST(HostThreadCount, MoeExpertsIsBitIdentical) {
  expect_thread_independent("moe_experts", [] {
    std::mt19937_64 rng(603);
    std::vector<ops::LinearWeight> up(5), down(5);
    for (int e = 0; e < 5; ++e) {
      up[e].weight = random_tensor({12, 10}, DType::BF16, rng, 0.3);
      down[e].weight = random_tensor({10, 12}, DType::BF16, rng, 0.3);
    }
    ops::MoeExpertsArgs a;
    a.x = random_tensor({11, 10}, DType::BF16, rng);
    a.up = &up;
    a.down = &down;
    std::vector<int32_t> ids;
    for (int t = 0; t < 11; ++t)
      ids.insert(ids.end(), {t % 5, (t + 2) % 5});
    a.ids = i32_tensor(ids).reshape({11, 2});
    a.weights = Tensor::empty({11, 2}, DType::F32);
    fill_uniform(a.weights, rng, 0.1, 1.0);
    a.out = Tensor::empty({11, 10}, DType::BF16);
    OpContext ctx;
    ops::run(ctx, a);
    return std::vector<Tensor>{a.out};
  });
}

}  // namespace
}  // namespace strata::reftest
