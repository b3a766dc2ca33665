// Randomized invariant test: thousands of random operations of every kind at
// several block sizes, checking the cache's invariants after each one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::Rng;

namespace {

struct Live {
  Request req;
  SeqKv seq;
  std::int32_t total = 0;
  bool swapped = false;
};

Request random_request(Rng& rng, RequestId id, std::int32_t max_len) {
  const std::int32_t len = rng.uniform(1, max_len);
  switch (rng.uniform(0, 2)) {
    case 0: {  // tokens with shared stems
      std::vector<TokenId> t(static_cast<std::size_t>(len));
      const std::int32_t stem = rng.uniform(0, 2);
      const std::int32_t shared = rng.uniform(0, len);
      for (std::int32_t i = 0; i < len; ++i) t[static_cast<std::size_t>(i)] = i < shared ? stem * 100000 + i : rng.uniform(0, 50);
      return twin::test::token_request(id, std::move(t));
    }
    case 1: {  // trace ids
      const std::int32_t t = rng.uniform(1, 40);
      std::vector<std::uint64_t> ids;
      const std::int32_t n = (len + t - 1) / t;
      const std::int32_t shared = rng.uniform(0, n);
      for (std::int32_t j = 0; j < n; ++j) ids.push_back(j < shared ? static_cast<std::uint64_t>(j) : 1000u + static_cast<std::uint64_t>(id) * 1000 + static_cast<std::uint64_t>(j));
      return twin::test::trace_request(id, len, std::move(ids), t);
    }
    default:
      return twin::test::length_request(id, len);
  }
}

void run_random(const KvCacheConfig& c, std::uint64_t seed, int ops) {
  KvCache kv(c);
  Rng rng(seed);
  std::vector<Live> live;
  std::vector<const SeqKv*> tables;
  const std::int32_t max_len = c.contiguous ? c.max_model_len - 8 : c.block_size * 12 + 5;
  auto verify = [&] {
    tables.clear();
    for (const Live& l : live) tables.push_back(&l.seq);
    const std::string problem = kv.check_invariants(tables);
    INFO(problem);
    REQUIRE(problem.empty());
  };
  for (int op = 0; op < ops; ++op) {
    const int what = rng.uniform(0, 9);
    if (what < 3 || live.empty()) {
      Live l;
      l.req = random_request(rng, op, max_len);
      kv.init_seq(l.req, l.seq);
      const std::int32_t hits = kv.lookup(l.req, l.seq);
      REQUIRE(hits * c.block_size < std::max(1, l.req.prompt_len));
      l.total = std::max(rng.uniform(1, l.req.prompt_len), hits * c.block_size + 1);
      const std::int32_t free_before = kv.num_free_blocks();
      if (kv.allocate(l.req, l.seq, hits, l.total, true)) {
        CHECK(kv.num_free_blocks() >= kv.watermark_blocks());
        live.push_back(std::move(l));
      } else {
        CHECK(kv.num_free_blocks() == free_before);
        CHECK(l.seq.blocks.empty());
      }
    } else {
      Live& l = live[static_cast<std::size_t>(rng.uniform(0, static_cast<int>(live.size()) - 1))];
      if (l.swapped) {
        std::vector<BlockCopy> copies;
        if (what < 8) {
          const std::size_t n = l.seq.host_blocks.size();
          if (kv.swap_in(l.seq, copies)) {
            REQUIRE(copies.size() == n);
            l.swapped = false;
          }
        } else {
          kv.free_host(l.seq);
          l = std::move(live.back());
          live.pop_back();
        }
      } else if (what < 6) {  // compute then grow
        kv.publish(l.req, l.seq, l.total);
        const std::int32_t grow = l.total < l.req.prompt_len ? rng.uniform(1, l.req.prompt_len - l.total) : 1;
        if (l.total + grow <= (c.contiguous ? c.max_model_len : 1 << 20) && kv.allocate(l.req, l.seq, 0, l.total + grow, false)) {
          l.total += grow;
        }
      } else if (what < 8 && c.num_host_blocks > 0) {
        std::vector<BlockCopy> copies;
        const std::size_t n = l.seq.blocks.size();
        if (kv.swap_out(l.seq, copies)) {
          REQUIRE(copies.size() == n);
          l.swapped = true;
        }
      } else {
        kv.free(l.seq);
        l = std::move(live.back());
        live.pop_back();
      }
    }
    verify();
  }
  for (Live& l : live) {
    if (l.swapped) kv.free_host(l.seq);
    else kv.free(l.seq);
  }
  live.clear();
  verify();
  CHECK(kv.num_free_blocks() == kv.num_blocks());
  CHECK(kv.num_free_host_blocks() == c.num_host_blocks);
}

}  // namespace

TEST_CASE("random operations keep every invariant (paged, several block sizes)") {
  for (const std::int32_t bs : {1, 3, 16, 512}) {
    INFO("block_size=" << bs);
    KvCacheConfig c;
    c.block_size = bs;
    c.num_blocks = 48;
    c.num_host_blocks = 24;
    c.watermark = 0.05;
    run_random(c, static_cast<std::uint64_t>(bs), 3000);
  }
}

TEST_CASE("random operations keep every invariant (KV tiers below HBM)") {
  for (const std::int32_t bs : {1, 4, 16}) {
    INFO("block_size=" << bs);
    KvCacheConfig c;
    c.block_size = bs;
    c.num_blocks = 40;
    c.num_host_blocks = 16;
    c.watermark = 0.05;
    c.tiers = {{"dram", 30}, {"ssd", 50}};
    run_random(c, 100 + static_cast<std::uint64_t>(bs), 3000);
  }
}

TEST_CASE("random operations keep every invariant (prefix caching off, contiguous)") {
  KvCacheConfig off;
  off.block_size = 8;
  off.num_blocks = 40;
  off.num_host_blocks = 16;
  off.enable_prefix_caching = false;
  run_random(off, 11, 2000);

  KvCacheConfig contiguous;
  contiguous.block_size = 16;
  contiguous.num_blocks = 64;
  contiguous.num_host_blocks = 32;
  contiguous.contiguous = true;
  contiguous.max_model_len = 200;
  run_random(contiguous, 12, 2000);
}
