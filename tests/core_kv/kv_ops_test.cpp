// Unit tests of each KV cache operation.
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.hpp"
#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::iota_request;
using twin::test::length_request;

namespace {

KvCacheConfig paged(std::int32_t blocks, std::int32_t block_size) {
  KvCacheConfig c;
  c.num_blocks = blocks;
  c.block_size = block_size;
  return c;
}

std::string check(const KvCache& kv, std::initializer_list<const SeqKv*> seqs) {
  const std::vector<const SeqKv*> v(seqs);
  return kv.check_invariants(v);
}

}  // namespace

TEST_CASE("config: block size 1..512, positive pool, watermark in 0 to 1 (exclusive)") {
  CHECK_THROWS_AS(KvCache(paged(8, 0)), UsageError);
  CHECK_THROWS_AS(KvCache(paged(8, 513)), UsageError);
  CHECK_THROWS_AS(KvCache(paged(0, 16)), UsageError);
  CHECK_NOTHROW(KvCache(paged(8, 1)));
  CHECK_NOTHROW(KvCache(paged(8, 512)));
  auto c = paged(8, 16);
  c.watermark = 1.0;
  CHECK_THROWS_AS(KvCache(c), UsageError);
  c.watermark = 0.0;
  c.contiguous = true;
  CHECK_THROWS_AS(KvCache(c), UsageError);  // no max_model_len
  CHECK_THROWS_AS(prompt_block_hashes(iota_request(1, 10), 600), UsageError);
}

TEST_CASE("allocate grows by whole blocks - free returns them, reused before untouched ones") {
  KvCache kv(paged(10, 4));
  const Request a = length_request(1, 10);
  SeqKv sa;
  kv.init_seq(a, sa);
  REQUIRE(kv.blocks_needed(sa, 10) == 3);
  REQUIRE(kv.allocate(a, sa, 0, 10, true));
  CHECK(sa.blocks == std::vector<BlockId>{0, 1, 2});
  CHECK(kv.num_free_blocks() == 7);
  CHECK(kv.ref_count(1) == 1);
  REQUIRE(kv.allocate(a, sa, 0, 12, false));  // still 3 blocks
  CHECK(sa.blocks.size() == 3);
  REQUIRE(kv.allocate(a, sa, 0, 13, false));
  CHECK(sa.blocks == std::vector<BlockId>{0, 1, 2, 3});
  CHECK(check(kv, {&sa}).empty());
  kv.free(sa);
  CHECK(sa.blocks.empty());
  CHECK(kv.num_free_blocks() == 10);
  CHECK(check(kv, {&sa}).empty());

  // a's uncached blocks first, the last freed (its head) first, then the
  // never-used ones.
  const Request b = length_request(2, 40);
  SeqKv sb;
  REQUIRE(kv.allocate(b, sb, 0, 40, true));
  CHECK(sb.blocks == std::vector<BlockId>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(kv.num_free_blocks() == 0);
  SeqKv sc;
  CHECK_FALSE(kv.allocate(length_request(3, 1), sc, 0, 1, false));
  CHECK(sc.blocks.empty());
  CHECK(check(kv, {&sb, &sc}).empty());
}

TEST_CASE("prefix hit: never the last prompt token, whole blocks only") {
  KvCache kv(paged(32, 4));
  const Request a = iota_request(1, 16);
  SeqKv sa;
  kv.init_seq(a, sa);
  CHECK(sa.hashes.size() == 4);
  CHECK(kv.lookup(a, sa) == 0);
  REQUIRE(kv.allocate(a, sa, 0, 16, true));
  kv.publish(a, sa, 8);  // a chunk: two blocks computed
  CHECK(sa.num_published == 2);
  CHECK(kv.num_cached_blocks() == 2);
  kv.publish(a, sa, 16);
  CHECK(kv.num_cached_blocks() == 4);

  // Same 16-token prompt: the block holding the last token is recomputed.
  const Request same = iota_request(2, 16);
  SeqKv s_same;
  kv.init_seq(same, s_same);
  CHECK(kv.lookup(same, s_same) == 3);
  // One more token: all four blocks hit.
  const Request longer = iota_request(3, 17);
  SeqKv s_longer;
  kv.init_seq(longer, s_longer);
  CHECK(kv.lookup(longer, s_longer) == 4);
  // Diverging in the second block: one block hits.
  std::vector<TokenId> t = iota_request(4, 17).prompt_tokens;
  t[5] = 999;
  const Request diverge = twin::test::token_request(4, t);
  SeqKv s_div;
  kv.init_seq(diverge, s_div);
  CHECK(kv.lookup(diverge, s_div) == 1);

  REQUIRE(kv.allocate(longer, s_longer, 4, 18, true));
  CHECK(std::vector<BlockId>(s_longer.blocks.begin(), s_longer.blocks.begin() + 4) == sa.blocks);
  CHECK(s_longer.blocks.size() == 5);
  CHECK(s_longer.num_published == 4);
  CHECK(kv.ref_count(sa.blocks[0]) == 2);
  CHECK(kv.stats().hit_blocks == 4);
  CHECK(kv.stats().queried_blocks == 7);  // a looked at 3 (16 tokens), longer at 4
  CHECK(kv.stats().lookups == 2);
  CHECK(check(kv, {&sa, &s_longer}).empty());
}

TEST_CASE("hit verification: same hash chain, different tokens is a miss") {
  KvCache kv(paged(16, 4));
  const Request a = iota_request(1, 12);
  SeqKv sa;
  kv.init_seq(a, sa);
  REQUIRE(kv.allocate(a, sa, 0, 12, true));
  kv.publish(a, sa, 12);
  const Request b = iota_request(2, 12, 100);
  SeqKv forged;
  forged.hashes = sa.hashes;  // as if b's tokens collided with a's hashes
  forged.num_named = sa.num_named;
  CHECK(kv.lookup(b, forged) == 0);
  const Request a2 = iota_request(3, 12);
  CHECK(kv.lookup(a2, forged) == 2);
}

TEST_CASE("freed published blocks stay cached until reused (lazy eviction)") {
  KvCache kv(paged(4, 4));
  const Request a = iota_request(1, 12);
  SeqKv sa;
  kv.init_seq(a, sa);
  REQUIRE(kv.allocate(a, sa, 0, 12, true));
  kv.publish(a, sa, 12);
  const std::vector<BlockId> a_blocks = sa.blocks;
  kv.free(sa);
  CHECK(kv.num_free_blocks() == 4);
  CHECK(kv.num_cached_blocks() == 3);
  for (BlockId b : a_blocks) CHECK(kv.is_cached(b));

  // Takes the never-used block 3, then a's tail block (2): one eviction.
  const Request other = length_request(2, 8);
  SeqKv so;
  REQUIRE(kv.allocate(other, so, 0, 8, true));
  CHECK(so.blocks == std::vector<BlockId>{3, 2});
  CHECK(kv.stats().evictions == 1);
  CHECK_FALSE(kv.is_cached(2));
  CHECK(kv.is_cached(0));
  CHECK(kv.is_cached(1));

  // a's head blocks still serve a hit.
  SeqKv sa2;
  kv.init_seq(a, sa2);
  CHECK(kv.lookup(a, sa2) == 2);
  CHECK(check(kv, {&so}).empty());
}

TEST_CASE("hits on free cached blocks consume free blocks - watermark holds - failure changes nothing") {
  auto c = paged(4, 4);
  c.watermark = 0.5;  // admissions must leave 2 blocks free
  KvCache kv(c);
  CHECK(kv.watermark_blocks() == 2);
  const Request a = iota_request(1, 12);
  SeqKv sa;
  kv.init_seq(a, sa);
  CHECK_FALSE(kv.allocate(a, sa, 0, 12, true));  // 3 of 4 would leave 1 free
  REQUIRE(kv.allocate(a, sa, 0, 12, false));     // a running request may dip in
  kv.publish(a, sa, 12);
  kv.free(sa);

  SeqKv sb;
  kv.init_seq(a, sb);
  REQUIRE(kv.lookup(a, sb) == 2);
  // 2 free hits + 1 new block = 3 blocks of 4, below the watermark.
  CHECK(kv.blocks_needed(sb, 12) == 3);
  CHECK_FALSE(kv.allocate(a, sb, 2, 12, true));
  CHECK(sb.blocks.empty());
  CHECK(kv.num_free_blocks() == 4);
  CHECK(kv.num_cached_blocks() == 3);
  CHECK(kv.stats().evictions == 0);
  CHECK(kv.stats().lookups == 1);
  REQUIRE(kv.allocate(a, sb, 2, 12, false));
  CHECK(kv.num_free_blocks() == 1);
  // The free list was [3, 2, 1, 0]: the hits leave from the middle and the
  // new block is the never-used 3, so a's cached tail block 2 survives.
  CHECK(sb.blocks == std::vector<BlockId>{0, 1, 3});
  CHECK(kv.stats().evictions == 0);
  CHECK(kv.is_cached(2));
  CHECK(check(kv, {&sb}).empty());
}

TEST_CASE("a hit on a block in use costs no free block") {
  KvCache kv(paged(4, 4));
  const Request a = iota_request(1, 9);
  SeqKv sa, sb;
  kv.init_seq(a, sa);
  kv.init_seq(a, sb);
  REQUIRE(kv.allocate(a, sa, 0, 9, true));  // 3 blocks, 1 free
  kv.publish(a, sa, 9);
  REQUIRE(kv.lookup(a, sb) == 2);
  // Needs 3 blocks; 2 are hits held by sa, so only 1 free block.
  REQUIRE(kv.allocate(a, sb, 2, 9, true));
  CHECK(kv.num_free_blocks() == 0);
  CHECK(kv.ref_count(sa.blocks[0]) == 2);
  CHECK(check(kv, {&sa, &sb}).empty());
  kv.free(sa);
  kv.free(sb);
  CHECK(kv.num_free_blocks() == 4);
  CHECK(check(kv, {}).empty());
}

TEST_CASE("a duplicate publish keeps the first block - the duplicate stays unpublished") {
  KvCache kv(paged(16, 4));
  const Request a = iota_request(1, 9);
  SeqKv s1, s2;
  kv.init_seq(a, s1);
  kv.init_seq(a, s2);
  REQUIRE(kv.allocate(a, s1, 0, 9, true));
  REQUIRE(kv.allocate(a, s2, 0, 9, true));  // admitted before s1 published
  kv.publish(a, s1, 9);
  kv.publish(a, s2, 9);
  CHECK(kv.num_cached_blocks() == 2);
  CHECK(kv.is_cached(s1.blocks[0]));
  CHECK_FALSE(kv.is_cached(s2.blocks[0]));
  CHECK(check(kv, {&s1, &s2}).empty());
}

TEST_CASE("prefix caching off: no hashes, no hits, nothing cached") {
  auto c = paged(16, 4);
  c.enable_prefix_caching = false;
  KvCache kv(c);
  const Request a = iota_request(1, 12);
  SeqKv sa, sb;
  kv.init_seq(a, sa);
  CHECK(sa.hashes.empty());
  REQUIRE(kv.allocate(a, sa, 0, 12, true));
  kv.publish(a, sa, 12);
  CHECK(kv.num_cached_blocks() == 0);
  kv.init_seq(a, sb);
  CHECK(kv.lookup(a, sb) == 0);
}

TEST_CASE("contiguous mode reserves max_model_len per request: far fewer fit than paged") {
  auto c = paged(64, 16);
  c.contiguous = true;
  c.max_model_len = 256;  // 16 blocks per request
  KvCache contiguous(c);
  KvCache pagedkv(paged(64, 16));
  auto admitted = [](KvCache& kv) {
    std::vector<SeqKv> seqs(100);
    int n = 0;
    for (auto& s : seqs) {
      const Request r = iota_request(n, 40);
      kv.init_seq(r, s);
      if (!kv.allocate(r, s, kv.lookup(r, s), 41, true)) break;
      ++n;
    }
    return n;
  };
  CHECK(admitted(contiguous) == 4);
  CHECK(admitted(pagedkv) == 21);  // 3 blocks for 41 tokens

  KvCache kv(c);
  const Request r = iota_request(1, 40);
  SeqKv s;
  kv.init_seq(r, s);
  CHECK(s.hashes.empty());  // prefix caching is off in this mode
  REQUIRE(kv.allocate(r, s, 0, 41, true));
  CHECK(s.blocks.size() == 16);
  REQUIRE(kv.allocate(r, s, 0, 256, false));  // never grows
  CHECK(s.blocks.size() == 16);
  CHECK(kv.blocks_needed(s, 200) == 0);
  CHECK_THROWS_AS(kv.allocate(r, s, 0, 257, false), Error);
}

TEST_CASE("swap out and back in: copies pair up, blocks move between tiers") {
  auto c = paged(8, 4);
  c.num_host_blocks = 4;
  KvCache kv(c);
  const Request a = iota_request(1, 12);
  SeqKv sa;
  kv.init_seq(a, sa);
  REQUIRE(kv.allocate(a, sa, 0, 12, true));
  kv.publish(a, sa, 12);
  const std::vector<BlockId> dev = sa.blocks;

  std::vector<BlockCopy> out;
  REQUIRE(kv.swap_out(sa, out));
  CHECK(sa.blocks.empty());
  CHECK(sa.host_blocks == std::vector<BlockId>{0, 1, 2});
  REQUIRE(out.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(out[i].src == dev[i]);
    CHECK(out[i].dst == sa.host_blocks[i]);
  }
  CHECK(kv.num_free_blocks() == 8);
  CHECK(kv.num_free_host_blocks() == 1);
  CHECK(kv.stats().swapped_out_blocks == 3);
  CHECK(check(kv, {&sa}).empty());

  // Another request cannot swap out: the host tier lacks room.
  const Request b = length_request(2, 8);
  SeqKv sb;
  REQUIRE(kv.allocate(b, sb, 0, 8, true));
  std::vector<BlockCopy> none;
  CHECK_FALSE(kv.swap_out(sb, none));
  CHECK(none.empty());
  CHECK(sb.blocks.size() == 2);

  // Fill the device so swap_in must fail cleanly.
  const Request big = length_request(3, 20);
  SeqKv sbig;
  REQUIRE(kv.allocate(big, sbig, 0, 20, false));
  CHECK(kv.num_free_blocks() == 1);
  std::vector<BlockCopy> in;
  CHECK_FALSE(kv.swap_in(sa, in));
  CHECK(in.empty());
  CHECK(sa.host_blocks.size() == 3);
  kv.free(sbig);

  const std::vector<BlockId> host = sa.host_blocks;
  REQUIRE(kv.swap_in(sa, in));
  REQUIRE(in.size() == 3);
  CHECK(sa.host_blocks.empty());
  CHECK(sa.blocks.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(in[i].src == host[i]);
    CHECK(in[i].dst == sa.blocks[i]);
  }
  CHECK(kv.num_free_host_blocks() == 4);
  CHECK(kv.stats().swapped_in_blocks == 3);
  CHECK(check(kv, {&sa, &sb}).empty());

  // Abort while swapped out: host blocks come back.
  REQUIRE(kv.swap_out(sb, out));
  kv.free_host(sb);
  CHECK(kv.num_free_host_blocks() == 4);
  CHECK(check(kv, {&sa, &sb}).empty());
}

TEST_CASE("check_invariants reports a ref count that disagrees with the tables") {
  KvCache kv(paged(8, 4));
  const Request a = length_request(1, 8);
  SeqKv sa;
  REQUIRE(kv.allocate(a, sa, 0, 8, true));
  CHECK(check(kv, {&sa}).empty());
  CHECK_FALSE(check(kv, {}).empty());       // blocks held by no table
  CHECK_FALSE(check(kv, {&sa, &sa}).empty());  // two tables claim them
}

TEST_CASE("bad requests are errors, not crashes") {
  KvCache kv(paged(8, 4));
  Request r = iota_request(7, 8);
  r.prompt_len = 9;
  SeqKv s;
  CHECK_THROWS_AS(kv.init_seq(r, s), Error);
  Request t = twin::test::trace_request(8, 32, {1, 2}, 0);
  CHECK_THROWS_AS(kv.init_seq(t, s), Error);
  const Request ok = iota_request(9, 8);
  kv.init_seq(ok, s);
  CHECK_THROWS_AS(kv.allocate(ok, s, 5, 8, true), Error);  // more hits than blocks
  CHECK_THROWS_AS(kv.allocate(ok, s, 1, 8, true), Error);  // nothing is cached
}
