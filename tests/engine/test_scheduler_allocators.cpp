// cache::BlockAllocator (reference-counted KV block ids), cache::SlotAllocator and
// cache::BlockTable over them: the ids the scheduler hands out.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "cache/block_allocator.h"
#include "core/check.h"

namespace strata::cache {
namespace {

TEST(BlockAllocator, ReferenceCountsShareAndFree) {
  BlockAllocator a(5, 4);
  EXPECT_EQ(a.num_blocks(), 5);
  EXPECT_EQ(a.blocks_for(0), 0);
  EXPECT_EQ(a.blocks_for(1), 1);
  EXPECT_EQ(a.blocks_for(8), 2);
  EXPECT_EQ(a.blocks_for(9), 3);
  std::vector<int32_t> got;
  EXPECT_FALSE(a.allocate(6, &got));  // all or nothing
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(a.num_free(), 5);
  ASSERT_TRUE(a.allocate(3, &got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));  // lowest ids first
  EXPECT_EQ(a.num_used(), 3);
  a.share(1);
  a.share(1);
  EXPECT_EQ(a.ref_count(1), 3);
  a.release(1);
  a.release(1);
  EXPECT_TRUE(a.in_use(1));
  EXPECT_EQ(a.num_free(), 2);
  a.release(1);  // its last reader: free again
  EXPECT_FALSE(a.in_use(1));
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_THROW(a.release(1), Error);  // double free
  EXPECT_THROW(a.share(1), Error);    // sharing a free block
  EXPECT_THROW(a.share(5), Error);    // out of range
  EXPECT_THROW(a.release(-1), Error);
  std::vector<int32_t> again;
  ASSERT_TRUE(a.allocate(1, &again));
  EXPECT_EQ(again[0], 1);  // the most recently freed block is reused first
  EXPECT_THROW(BlockAllocator(-1, 4), Error);
  EXPECT_THROW(BlockAllocator(4, 0), Error);
  EXPECT_THROW(BlockAllocator(INT32_MAX / 2, 4), Error);  // flat slot ids overflow i32
}

TEST(BlockAllocator, RandomTablesAgreeWithAnIndependentCount) {
  // Tables grow, fork (share a prefix) and release at random; a map of expected reference
  // counts built from the tables themselves must match the allocator after every operation.
  const int64_t num_blocks = 50, bs = 3;
  BlockAllocator a(num_blocks, bs);
  std::mt19937 rng(7);
  std::vector<BlockTable> tables;
  std::vector<int64_t> lengths;
  int64_t forks = 0, refused = 0, checks = 0;
  for (int op = 0; op < 3000; ++op) {
    const uint32_t r = rng() % 10;
    if (tables.empty() || r < 3) {  // a new sequence
      tables.emplace_back();
      lengths.push_back(0);
    } else if (r < 7) {  // grow one
      const size_t i = rng() % tables.size();
      const int64_t want = lengths[i] + 1 + static_cast<int64_t>(rng() % 7);
      const int64_t missing = tables[i].blocks_missing(a, want);
      const int64_t free_before = a.num_free();
      if (tables[i].ensure(a, want)) {
        lengths[i] = want;
        EXPECT_EQ(free_before - a.num_free(), missing);
        EXPECT_EQ(tables[i].num_blocks(), a.blocks_for(want));
      } else {
        ++refused;
        EXPECT_GT(missing, free_before);
        EXPECT_EQ(a.num_free(), free_before);
      }
    } else if (r < 8) {  // fork: share the full blocks of one
      const size_t i = rng() % tables.size();
      const int64_t full = lengths[i] / bs;
      BlockTable child;
      child.share_prefix(tables[i], full, a);
      for (int64_t j = 0; j < full; ++j)
        EXPECT_EQ(child.blocks()[static_cast<size_t>(j)],
                  tables[i].blocks()[static_cast<size_t>(j)]);
      tables.push_back(std::move(child));
      lengths.push_back(full * bs);
      ++forks;
    } else {  // release one
      const size_t i = rng() % tables.size();
      tables[i].release(a);
      EXPECT_EQ(tables[i].num_blocks(), 0);
      tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
      lengths.erase(lengths.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::map<int32_t, int32_t> expected;
    for (const BlockTable& t : tables)
      for (int32_t b : t.blocks())
        ++expected[b];
    for (int32_t b = 0; b < num_blocks; ++b) {
      const auto it = expected.find(b);
      ASSERT_EQ(a.ref_count(b), it == expected.end() ? 0 : it->second) << "block " << b;
      ++checks;
    }
    ASSERT_EQ(a.num_used(), static_cast<int64_t>(expected.size()));
  }
  for (BlockTable& t : tables)
    t.release(a);
  EXPECT_EQ(a.num_free(), num_blocks);
  EXPECT_GT(forks, 100);
  EXPECT_GT(refused, 10);
  EXPECT_EQ(checks, 3000 * num_blocks);
}

TEST(BlockTable, SlotMapsPositionsThroughItsBlocks) {
  BlockAllocator a(8, 4);
  std::vector<int32_t> burn;
  ASSERT_TRUE(a.allocate(2, &burn));  // the table gets blocks 2, 3, 4
  BlockTable t;
  ASSERT_TRUE(t.ensure(a, 10));
  EXPECT_EQ(t.blocks(), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(t.capacity(4), 12);
  EXPECT_TRUE(t.ensure(a, 12));  // already held: nothing allocated
  EXPECT_EQ(a.num_free(), 3);
  for (int64_t pos = 0; pos < 12; ++pos)
    EXPECT_EQ(t.slot(pos, 4), t.blocks()[static_cast<size_t>(pos / 4)] * 4 + pos % 4);
  EXPECT_THROW(t.slot(12, 4), Error);
  EXPECT_THROW(t.slot(-1, 4), Error);
  BlockTable child;
  EXPECT_THROW(child.share_prefix(t, 4, a), Error);  // more blocks than the table has
  child.share_prefix(t, 2, a);
  EXPECT_EQ(a.ref_count(2), 2);
  EXPECT_EQ(a.ref_count(4), 1);
  t.release(a);
  EXPECT_EQ(a.ref_count(2), 1);  // the child still reads it
  EXPECT_FALSE(a.in_use(4));
  child.release(a);
  a.release(burn);
  EXPECT_EQ(a.num_free(), 8);
}

TEST(SlotAllocator, HandsOutEachSlotOnce) {
  SlotAllocator s(3);
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    const auto id = s.allocate();
    ASSERT_TRUE(id.has_value());
    EXPECT_TRUE(got.insert(*id).second);
    EXPECT_TRUE(s.in_use(*id));
  }
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2}));
  EXPECT_FALSE(s.allocate().has_value());
  EXPECT_EQ(s.num_free(), 0);
  s.release(1);
  EXPECT_FALSE(s.in_use(1));
  EXPECT_THROW(s.release(1), Error);  // double free
  EXPECT_THROW(s.release(3), Error);  // out of range
  EXPECT_EQ(s.allocate(), std::optional<int32_t>(1));
  EXPECT_THROW(SlotAllocator(-1), Error);
  SlotAllocator none(0);
  EXPECT_FALSE(none.allocate().has_value());
}

}  // namespace
}  // namespace strata::cache
