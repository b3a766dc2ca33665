// KV tiers below HBM (engine/core/kv_tiers.hpp): evicted prefix blocks spill
// down in LRU order, a full tier demotes to the next, the last drops; a
// lookup that misses HBM finds them there and allocation loads them back.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "base/error.hpp"
#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::iota_request;

namespace {

std::int64_t sum(const std::vector<std::int32_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

// Computes and frees a request: its full prompt blocks end up cached and free.
void serve(KvCache& kv, const Request& req) {
  SeqKv seq;
  kv.init_seq(req, seq);
  const std::int32_t hits = kv.lookup(req, seq);
  REQUIRE(kv.allocate(req, seq, hits, req.prompt_len, true));
  kv.publish(req, seq, req.prompt_len);
  kv.free(seq);
}

}  // namespace

TEST_CASE("tiers: LRU per tier, demotion down the list, drop from the last") {
  KvTiers t({{"dram", 2}, {"ssd", 2}});
  for (BlockHash h = 1; h <= 3; ++h) t.spill(h, 0);
  // dram holds the two most recent (2, 3); 1 went down to ssd.
  CHECK(t.find(1) == 1);
  CHECK(t.find(2) == 0);
  CHECK(t.find(3) == 0);
  CHECK(t.stats(0).stored_blocks == 3);
  CHECK(t.stats(0).demoted_blocks == 1);
  CHECK(t.stats(1).stored_blocks == 1);
  // A hit makes 2 the most recent in dram: the next spill demotes 3.
  t.hit(2);
  t.spill(4, 0);
  CHECK(t.find(3) == 1);
  CHECK(t.find(2) == 0);
  // ssd overflows: its least recent (1) is dropped.
  t.spill(5, 0);
  CHECK(t.find(1) == -1);
  CHECK(t.stats(1).demoted_blocks == 1);
  // A block evicted again while its copy is in dram costs no write.
  const std::int64_t stored = t.stats(0).stored_blocks;
  t.spill(5, 0);
  CHECK(t.stats(0).stored_blocks == stored);
  // One in ssd evicted from HBM again is written to dram, leaving ssd.
  t.spill(3, 0);
  CHECK(t.find(3) == 0);
  CHECK(t.check().empty());
  std::vector<std::int32_t> loads, stores;
  t.take_moves(loads, stores);
  CHECK(loads == std::vector<std::int32_t>{1, 0});
  CHECK(sum(stores) > 0);
  CHECK_FALSE(t.has_moves());
}

TEST_CASE("tiers: bad tiers are refused") {
  CHECK_THROWS_AS(KvTiers({{"dram", 0}}), UsageError);
  CHECK_THROWS_AS(KvTiers({{"", 4}}), UsageError);
  KvCacheConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  c.enable_prefix_caching = false;
  c.tiers = {{"dram", 8}};
  CHECK_THROWS_AS(KvCache(c), UsageError);
}

TEST_CASE("tiers: an evicted prefix is loaded back from DRAM, then published") {
  KvCacheConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  c.tiers = {{"dram", 64}};
  KvCache kv(c);
  const Request a = iota_request(1, 17, 0);      // 4 full blocks + 1 token
  const Request b = iota_request(2, 32, 5000);   // 8 blocks: evicts all of a's
  serve(kv, a);
  std::vector<std::int32_t> loads, stores;
  CHECK_FALSE(kv.take_tier_moves(loads, stores));
  serve(kv, b);
  REQUIRE(kv.take_tier_moves(loads, stores));
  CHECK(stores == std::vector<std::int32_t>{4});  // a's published blocks spilled
  CHECK(loads == std::vector<std::int32_t>{0});

  SeqKv seq;
  kv.init_seq(a, seq);
  REQUIRE(kv.lookup(a, seq) == 4);  // all from DRAM
  REQUIRE(kv.allocate(a, seq, 4, a.prompt_len, true));
  REQUIRE(kv.take_tier_moves(loads, stores));
  CHECK(loads == std::vector<std::int32_t>{4});
  CHECK(seq.num_published == 0);  // loaded blocks are published once computed
  CHECK(kv.stats().tier_hit_blocks == 4);
  CHECK(kv.stats().hit_blocks == 4);
  const std::vector<const SeqKv*> tables = {&seq};
  CHECK(kv.check_invariants(tables).empty());
  kv.publish(a, seq, 16);
  CHECK(seq.num_published == 4);
  // Now in HBM again: a second lookup hits there, nothing more is loaded.
  SeqKv again;
  kv.init_seq(a, again);
  CHECK(kv.lookup(a, again) == 4);
  REQUIRE(kv.allocate(a, again, 4, a.prompt_len, true));
  // (Its fresh last block evicted one of b's, which spilled: a store only.)
  if (kv.take_tier_moves(loads, stores)) CHECK(loads == std::vector<std::int32_t>{0});
  CHECK(kv.stats().tier_hit_blocks == 4);
  kv.free(again);
  kv.free(seq);
  CHECK(kv.check_invariants({}).empty());
  CHECK(kv.num_free_blocks() == kv.num_blocks());
}

TEST_CASE("tiers: a prefix split between HBM and DRAM, hits taken before fresh blocks are popped") {
  KvCacheConfig c;
  c.num_blocks = 6;
  c.block_size = 4;
  c.tiers = {{"dram", 64}};
  KvCache kv(c);
  const Request a = iota_request(1, 21, 0);  // 5 full blocks
  serve(kv, a);
  // Evict the tail blocks of a (freed first, so evicted first): 2 of them.
  const Request b = iota_request(2, 8, 9000);
  SeqKv hold;
  kv.init_seq(b, hold);
  REQUIRE(kv.allocate(b, hold, 0, 8, false));  // pops a's partial block, then its last full one
  std::vector<std::int32_t> loads, stores;
  kv.take_tier_moves(loads, stores);
  CHECK(sum(stores) == 1);
  kv.free(hold);
  SeqKv seq;
  kv.init_seq(a, seq);
  REQUIRE(kv.lookup(a, seq) == 5);
  REQUIRE(kv.allocate(a, seq, 5, a.prompt_len, true));
  kv.take_tier_moves(loads, stores);
  CHECK(loads == std::vector<std::int32_t>{1});
  CHECK(seq.num_published == 4);  // the leading HBM hits
  const std::vector<const SeqKv*> tables = {&seq};
  CHECK(kv.check_invariants(tables).empty());
  kv.publish(a, seq, 20);
  CHECK(seq.num_published == 5);
  kv.free(seq);
  CHECK(kv.check_invariants({}).empty());
}

TEST_CASE("tiers: failed allocation changes nothing") {
  KvCacheConfig c;
  c.num_blocks = 4;
  c.block_size = 4;
  c.tiers = {{"dram", 16}};
  KvCache kv(c);
  const Request a = iota_request(1, 13, 0);  // 3 full blocks
  serve(kv, a);
  serve(kv, iota_request(2, 16, 700));     // evicts a
  std::vector<std::int32_t> loads, stores;
  kv.take_tier_moves(loads, stores);
  SeqKv hold;
  const Request c2 = iota_request(3, 8, 5555);
  kv.init_seq(c2, hold);
  REQUIRE(kv.allocate(c2, hold, 0, 8, false));  // 2 blocks held: a needs 4
  SeqKv seq;
  kv.init_seq(a, seq);
  const std::int32_t hits = kv.lookup(a, seq);
  REQUIRE(hits == 3);
  CHECK_FALSE(kv.allocate(a, seq, hits, a.prompt_len, true));
  CHECK(seq.blocks.empty());
  CHECK(kv.tiers().stats(0).hit_blocks == 0);
  kv.free(hold);
  CHECK(kv.check_invariants({}).empty());
}
