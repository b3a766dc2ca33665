// The pool is sized lazily: a cache of 2^31-1 blocks (what a simulated
// replica on a big GPU may be planned to hold) costs what the blocks it has
// handed out cost. Memory is measured by the
// containers' capacities, not the process's RSS: deterministic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "engine/core/block_pool.hpp"
#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::iota_request;

namespace {

constexpr std::int32_t kHuge = std::numeric_limits<std::int32_t>::max();

}  // namespace

TEST_CASE("a pool of 2^31-1 blocks costs a few KB until blocks are used") {
  KvCacheConfig c;
  c.num_blocks = kHuge;
  c.block_size = 16;
  c.num_host_blocks = kHuge;
  const KvCache kv(c);
  CHECK(kv.num_free_blocks() == kHuge);
  CHECK(kv.num_free_host_blocks() == kHuge);
  CHECK(kv.num_touched_blocks() == 0);
  CHECK(kv.state_bytes() < 4096);
  CHECK(kv.check_invariants({}).empty());
}

TEST_CASE("a huge pool's state grows with the blocks in use, not with its size") {
  KvCacheConfig c;
  c.num_blocks = kHuge;
  c.block_size = 4;
  c.num_host_blocks = kHuge;
  KvCache kv(c);
  std::vector<SeqKv> seqs(50);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const Request r = iota_request(static_cast<RequestId>(i), 40);  // 10 blocks, tokens stored
    kv.init_seq(r, seqs[i]);
    REQUIRE(kv.allocate(r, seqs[i], 0, 40, true));
    kv.publish(r, seqs[i], 40);
  }
  CHECK(kv.num_touched_blocks() == 500);
  CHECK(kv.num_free_blocks() == kHuge - 500);
  std::vector<BlockCopy> copies;
  REQUIRE(kv.swap_out(seqs[3], copies));
  CHECK(copies.size() == 10);
  CHECK(copies.front().dst == 0);  // host blocks in id order from 0
  std::vector<const SeqKv*> held;
  for (const SeqKv& s : seqs) held.push_back(&s);
  CHECK(kv.check_invariants(held).empty());
  // 500 blocks of 4 tokens: node, hash, ring slot, tokens and the hash index
  // are well under 100 bytes a block, with room for vector doubling.
  CHECK(kv.state_bytes() < 500 * 200);
}

TEST_CASE("uncached blocks are reused most recently freed first, untouched ids only when none is free") {
  BlockPool pool(8, 4);
  bool evicted = false;
  std::vector<BlockId> got;
  for (int i = 0; i < 3; ++i) got.push_back(pool.pop_free(evicted));
  CHECK(got == std::vector<BlockId>{0, 1, 2});
  pool.release(1);
  pool.release(0);
  // Which uncached block a pop hands out changes nothing but its id: the
  // pool takes the one freed last (its state is in cache) and touches no
  // new block while one is free.
  got.clear();
  for (int i = 0; i < 7; ++i) got.push_back(pool.pop_free(evicted));
  CHECK(got == std::vector<BlockId>{0, 1, 3, 4, 5, 6, 7});
  CHECK_FALSE(evicted);
  CHECK(pool.num_free() == 0);
  CHECK(pool.check().empty());
  CHECK(pool.num_touched() == 8);
}

TEST_CASE("cached blocks are evicted in free order, the uncached ones freed between them taking their turns") {
  // An LRU list of every block: u0 c1 u2 c3 (u uncached, c cached). Popping
  // takes an uncached block, evicts c1, takes an uncached one, evicts c3.
  BlockPool pool(4, 1);
  bool evicted = false;
  std::vector<BlockId> b;
  for (int i = 0; i < 4; ++i) b.push_back(pool.pop_free(evicted));
  REQUIRE(pool.publish(b[1], 11, {}));
  REQUIRE(pool.publish(b[3], 33, {}));
  for (const BlockId x : b) pool.release(x);
  CHECK(pool.check().empty());
  CHECK(pool.num_cached() == 2);
  std::vector<bool> evictions;
  std::vector<BlockId> got;
  for (int i = 0; i < 4; ++i) {
    got.push_back(pool.pop_free(evicted));
    evictions.push_back(evicted);
    CHECK(pool.check().empty());
  }
  CHECK(evictions == std::vector<bool>{false, true, false, true});
  CHECK(got[1] == b[1]);
  CHECK(got[3] == b[3]);
  CHECK(pool.num_cached() == 0);
}

TEST_CASE("a prefix hit from the middle keeps the uncached turns freed before it") {
  // u0 c1 u2 c3, then c1 is taken back as a hit: u0 u2 c3 are left, and the
  // compaction of the stale entries must keep that order.
  BlockPool pool(4, 1);
  bool evicted = false;
  std::vector<BlockId> b;
  for (int i = 0; i < 4; ++i) b.push_back(pool.pop_free(evicted));
  REQUIRE(pool.publish(b[1], 11, {}));
  REQUIRE(pool.publish(b[3], 33, {}));
  for (const BlockId x : b) pool.release(x);
  pool.acquire(b[1]);
  CHECK(pool.check().empty());
  // Hits on c3 (taken and freed again: it stays last) fill the ring with
  // stale entries until it compacts.
  for (int round = 0; round < 40; ++round) {
    pool.acquire(b[3]);
    pool.release(b[3]);
    REQUIRE(pool.check().empty());
  }
  std::vector<bool> evictions;
  std::vector<BlockId> got;
  for (int i = 0; i < 3; ++i) {
    got.push_back(pool.pop_free(evicted));
    evictions.push_back(evicted);
  }
  CHECK(evictions == std::vector<bool>{false, false, true});
  CHECK(got[2] == b[3]);
  CHECK(pool.check().empty());
}

TEST_CASE("a freed cached block taken back as a hit leaves the lazy free list from the middle") {
  BlockPool pool(6, 2);
  bool evicted = false;
  const BlockId a = pool.pop_free(evicted);
  const BlockId b = pool.pop_free(evicted);
  const std::vector<TokenId> tokens = {1, 2};
  REQUIRE(pool.publish(a, 77, tokens));
  pool.release(a);
  pool.release(b);
  CHECK(pool.find(77) == a);
  pool.acquire(a);  // a prefix hit on a free cached block
  CHECK(pool.num_free() == 5);
  CHECK(pool.check().empty());
  std::vector<BlockId> got;
  for (int i = 0; i < 5; ++i) got.push_back(pool.pop_free(evicted));
  // b is the one uncached block freed: reused first, then untouched ids.
  CHECK(got == std::vector<BlockId>{b, 2, 3, 4, 5});
  CHECK(pool.check().empty());
}

TEST_CASE("the pool evicts the cached blocks one LRU list over every block would, at the same pops") {
  // Reference: one list of every free block in free order (untouched blocks
  // first), where an uncached block is an anonymous turn (-1) and a cached
  // one is its id. A pop at an uncached turn must hand out some free
  // uncached block without evicting; at a cached entry, that very block,
  // evicted. Hits take cached free blocks from the middle.
  constexpr std::int32_t kBlocks = 48;
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    BlockPool pool(kBlocks, 1);
    std::deque<BlockId> lru(kBlocks, -1);
    std::vector<BlockId> held;           // one entry per reference
    std::vector<BlockId> free_cached;    // free cached blocks (hit candidates)
    std::mt19937 rng(seed);
    BlockHash next_hash = 1;
    // Odd seeds pop often; even seeds mostly take hits and free them again,
    // filling the ring with stale entries until it compacts.
    const std::uint32_t pops = seed % 2 == 1 ? 4 : 1;
    for (int op = 0; op < 4000; ++op) {
      const std::uint32_t what = rng() % 10;
      if (what < pops && pool.num_free() > 0) {
        bool evicted = false;
        const BlockId b = pool.pop_free(evicted);
        const BlockId want = lru.front();
        lru.pop_front();
        if (want < 0) {
          REQUIRE_FALSE(evicted);
        } else {
          REQUIRE(evicted);
          REQUIRE(b == want);
          free_cached.erase(std::find(free_cached.begin(), free_cached.end(), b));
        }
        held.push_back(b);
      } else if (what < pops + 3 && !held.empty()) {
        const std::size_t k = rng() % held.size();
        const BlockId b = held[k];
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        pool.release(b);
        if (pool.ref_count(b) == 0) {
          const bool cached = pool.is_cached(b);
          lru.push_back(cached ? b : -1);
          if (cached) free_cached.push_back(b);
        }
      } else if (what < pops + 5 && !held.empty()) {
        const BlockId b = held[rng() % held.size()];
        if (!pool.is_cached(b)) REQUIRE(pool.publish(b, next_hash++, {}));
      } else if (!free_cached.empty()) {
        const std::size_t k = rng() % free_cached.size();
        const BlockId b = free_cached[k];
        free_cached.erase(free_cached.begin() + static_cast<std::ptrdiff_t>(k));
        lru.erase(std::find(lru.begin(), lru.end(), b));
        pool.acquire(b);
        held.push_back(b);
      }
      REQUIRE(pool.num_free() == static_cast<std::int32_t>(lru.size()));
      if (op % 97 == 0) REQUIRE(pool.check().empty());
    }
    CHECK(pool.check().empty());
  }
}
