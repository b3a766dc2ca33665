// The pool is sized lazily: a cache of 2^31-1 blocks (what a simulated
// replica on a big GPU may be planned to hold) costs what the blocks it has
// handed out cost, and hands out the same ids in the same order as a pool
// that started with every block on its free list. Memory is measured by the
// containers' capacities, not the process's RSS: deterministic.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
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

TEST_CASE("lazy and eager hand out the same blocks: untouched ids first, lowest first, then LRU") {
  // The order an eager pool (every block on the free list at start, in id
  // order) hands blocks out: the reference the lazy pool must reproduce.
  BlockPool pool(8, 4);
  bool evicted = false;
  std::vector<BlockId> got;
  for (int i = 0; i < 3; ++i) got.push_back(pool.pop_free(evicted));
  CHECK(got == std::vector<BlockId>{0, 1, 2});
  pool.release(1);
  pool.release(0);
  // Blocks 3..7 were on the eager free list before 1 and 0 were freed.
  got.clear();
  for (int i = 0; i < 7; ++i) got.push_back(pool.pop_free(evicted));
  CHECK(got == std::vector<BlockId>{3, 4, 5, 6, 7, 1, 0});
  CHECK(pool.num_free() == 0);
  CHECK(pool.check().empty());
  CHECK(pool.num_touched() == 8);
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
  CHECK(got == std::vector<BlockId>{2, 3, 4, 5, b});
  CHECK(pool.check().empty());
}
