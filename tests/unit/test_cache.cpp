// Cache accounting: Mamba state slots (zeroed on hand-out, exhaustion, misuse), KV blocks and
// block tables (random allocate/free against an independent model of ownership), and sizes
// against spec 4.1 / 4.4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "cache/cache_plan.h"
#include "core/check.h"
#include "model/nemotron_h/config.h"

namespace strata::cache {
namespace {

using model::ModelConfig;

ModelConfig tiny_config() {
  ModelConfig c;
  c.source = "tiny";
  for (char ch : std::string("M*M-*E"))
    c.layers.push_back(model::layer_kind_from_char(ch, "tiny", 0));
  c.hidden_size = 32;
  c.vocab_size = 64;
  c.mamba_num_heads = 4;
  c.mamba_head_dim = 8;
  c.ssm_state_size = 6;
  c.n_groups = 2;
  c.conv_kernel = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.mlp_intermediate_sizes = {48};
  c.n_routed_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.moe_shared_expert_intermediate_size = 16;
  c.finalize();
  return c;
}

// Fills every byte of a host tensor with random non-zero bytes.
void scribble(const Tensor& t, std::mt19937& rng) {
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<unsigned char>(1 + rng() % 255);
}

bool all_zero(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  return std::all_of(p, p + t.nbytes(), [](unsigned char b) { return b == 0; });
}

TEST(Cache, MambaSlotsAreZeroedAndAccounted) {
  const ModelConfig c = tiny_config();
  MambaStatePool pool(c, 3, DType::BF16, Device::Host);
  ASSERT_EQ(pool.num_layers(), 2);
  EXPECT_EQ(pool.conv_states(0).shape(), (Shape{3, 3, c.conv_dim}));
  EXPECT_EQ(pool.ssm_states(1).shape(), (Shape{3, 4, 8, 6}));
  EXPECT_EQ(pool.ssm_states(1).dtype(), DType::F32);
  EXPECT_EQ(pool.conv_states(1).dtype(), DType::BF16);
  EXPECT_EQ(pool.bytes(), 3 * MambaStatePool::bytes_per_slot(c, DType::BF16));

  std::mt19937 rng(7);
  for (int l = 0; l < 2; ++l) {  // the whole pool starts as garbage
    scribble(pool.conv_states(l), rng);
    scribble(pool.ssm_states(l), rng);
  }
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    const int32_t s = pool.allocate();
    EXPECT_TRUE(got.insert(s).second) << "slot handed out twice: " << s;
    for (int l = 0; l < 2; ++l) {
      EXPECT_TRUE(all_zero(pool.conv_states(l).select(s))) << "slot " << s;
      EXPECT_TRUE(all_zero(pool.ssm_states(l).select(s))) << "slot " << s;
    }
  }
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.try_allocate().has_value());
  EXPECT_THROW(pool.allocate(), Error);

  // A freed, dirtied slot comes back zeroed; the other slots keep their bytes.
  const int32_t victim = 1;
  scribble(pool.ssm_states(0).select(victim), rng);
  scribble(pool.conv_states(1).select(victim), rng);
  const Tensor other = pool.ssm_states(0).select(2);
  std::vector<unsigned char> before(
      static_cast<const unsigned char*>(other.raw()),
      static_cast<const unsigned char*>(other.raw()) + other.nbytes());
  scribble(other, rng);
  std::memcpy(before.data(), other.raw(), other.nbytes());
  pool.free(victim);
  EXPECT_FALSE(pool.in_use(victim));
  EXPECT_THROW(pool.free(victim), Error);  // double free
  EXPECT_THROW(pool.free(7), Error);       // out of range
  EXPECT_EQ(pool.allocate(), victim);
  EXPECT_TRUE(all_zero(pool.ssm_states(0).select(victim)));
  EXPECT_TRUE(all_zero(pool.conv_states(1).select(victim)));
  EXPECT_EQ(std::memcmp(before.data(), other.raw(), other.nbytes()), 0);
  EXPECT_THROW(MambaStatePool(c, 0, DType::BF16, Device::Host), Error);
}

TEST(Cache, KvBlocksRandomAllocateFree) {
  const ModelConfig c = tiny_config();
  const int64_t block_size = 4, num_blocks = 37;
  KvBlockPool pool(c, num_blocks, block_size, DType::F32, Device::Host);
  ASSERT_EQ(pool.num_layers(), 2);
  EXPECT_EQ(pool.k_cache(1).shape(), (Shape{num_blocks, block_size, 2, 8}));

  // Several sequences grow and finish at random; an independent owner map must agree.
  std::mt19937 rng(42);
  std::map<int, BlockTable> seqs;
  std::map<int, int64_t> lengths;
  std::map<int32_t, int> owner;  // block -> sequence
  int next_id = 0, grows = 0, refused = 0, releases = 0;
  for (int step = 0; step < 2000; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 7 || seqs.empty()) {  // grow an existing or a new sequence
      int id;
      if (seqs.empty() || rng() % 4 == 0) {
        id = next_id++;
        seqs[id];
        lengths[id] = 0;
      } else {
        auto it = seqs.begin();
        std::advance(it, rng() % seqs.size());
        id = it->first;
      }
      const int64_t want = lengths[id] + 1 + static_cast<int64_t>(rng() % 9);
      const size_t before = seqs[id].blocks().size();
      const int64_t free_before = pool.num_free();
      if (seqs[id].ensure(pool, want)) {
        ++grows;
        lengths[id] = want;
        const auto& b = seqs[id].blocks();
        EXPECT_EQ(static_cast<int64_t>(b.size()), (want + block_size - 1) / block_size);
        EXPECT_EQ(free_before - pool.num_free(), static_cast<int64_t>(b.size() - before));
        for (size_t i = before; i < b.size(); ++i) {
          EXPECT_EQ(owner.count(b[i]), 0u) << "block " << b[i] << " handed out twice";
          owner[b[i]] = id;
        }
        // Every position maps into one of its own blocks at the right offset.
        for (int64_t pos = 0; pos < want; ++pos) {
          const int32_t slot = seqs[id].slot(pos, block_size);
          EXPECT_EQ(owner[slot / static_cast<int32_t>(block_size)], id);
          EXPECT_EQ(slot % block_size, pos % block_size);
        }
      } else {
        ++refused;
        EXPECT_EQ(seqs[id].blocks().size(), before);  // all-or-nothing
        EXPECT_EQ(pool.num_free(), free_before);
        EXPECT_LT(pool.num_free(),
                  (want + block_size - 1) / block_size - static_cast<int64_t>(before));
      }
    } else {  // finish a sequence
      auto it = seqs.begin();
      std::advance(it, rng() % seqs.size());
      for (int32_t b : it->second.blocks())
        owner.erase(b);
      it->second.release(pool);
      EXPECT_TRUE(it->second.blocks().empty());
      lengths.erase(it->first);
      seqs.erase(it);
      ++releases;
    }
    ASSERT_EQ(pool.num_free() + static_cast<int64_t>(owner.size()), num_blocks);
  }
  EXPECT_GT(grows, 100);
  EXPECT_GT(refused, 0);  // the pool did run out
  EXPECT_GT(releases, 50);
  std::vector<int32_t> bogus = {static_cast<int32_t>(num_blocks)};
  EXPECT_THROW(pool.free(bogus), Error);
}

TEST(Cache, SizesMatchSpec) {
  // spec 4.1: Nano-3 per sequence conv 23 x 3 x 6144 x 2 B, SSM 23 x 64x64x128 x 4 B = 46 MiB.
  const ModelConfig nano = ModelConfig::preset("nemotron-3-nano-30b-a3b");
  EXPECT_EQ(MambaStatePool::bytes_per_slot(nano, DType::BF16), 23u * 3 * 6144 * 2 + (46u << 20));
  // spec 4.4: 6 layers x (K, V) x 2 kv heads x 128 = 3072 values per token, 6 KiB in bf16.
  EXPECT_EQ(KvBlockPool::bytes_per_block(nano, 1, DType::BF16), 6u * 1024);
  // spec 4.1: H-8B SSM 24 x 4 MiB.
  const ModelConfig h8 = ModelConfig::preset("nemotron-h-8b");
  EXPECT_EQ(MambaStatePool::bytes_per_slot(h8, DType::BF16) - 24u * 3 * h8.conv_dim * 2, 96u << 20);
}

TEST(Cache, Plans) {
  const ModelConfig c = tiny_config();
  const size_t slot = MambaStatePool::bytes_per_slot(c, DType::F32);
  const size_t block = KvBlockPool::bytes_per_block(c, 8, DType::F32);
  CachePlan p = plan_cache_for_budget(c, 2 * slot + 10 * block + block / 2, 2, 8, DType::F32);
  EXPECT_EQ(p.state_slots, 2);
  EXPECT_EQ(p.num_blocks, 10);
  EXPECT_EQ(p.state_bytes, 2 * slot);
  EXPECT_EQ(p.kv_bytes, 10 * block);
  EXPECT_THROW(plan_cache_for_budget(c, 2 * slot + block, 2, 8, DType::F32), Error);
  p = plan_cache_for_tokens(c, 3, 17, 8, DType::F32);
  EXPECT_EQ(p.num_blocks, 9);  // 3 sequences x ceil(17 / 8)
  ModelCache mc(c, p, Device::Host);
  EXPECT_EQ(mc.kv.num_blocks(), 9);
  EXPECT_EQ(mc.mamba.num_slots(), 3);
  EXPECT_EQ(mc.mamba.bytes() + mc.kv.bytes(), p.state_bytes + p.kv_bytes);
  // A model without attention layers needs no blocks, and block tables stay empty.
  ModelConfig mamba_only = tiny_config();
  mamba_only.layers.assign(3, model::LayerKind::Mamba);
  mamba_only.finalize();
  p = plan_cache_for_tokens(mamba_only, 1, 100, 16, DType::F32);
  EXPECT_EQ(p.num_blocks, 0);
  ModelCache m2(mamba_only, p, Device::Host);
  BlockTable t;
  EXPECT_TRUE(t.ensure(m2.kv, 100));
  EXPECT_TRUE(t.blocks().empty());
}

}  // namespace
}  // namespace strata::cache
