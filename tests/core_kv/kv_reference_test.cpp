// Prefix caching against a brute-force reference: a naive model of the same
// policy (LRU free list as a plain vector, cache keyed by the whole token
// prefix a block ends) run side by side with KvCache on random shared-prefix
// workloads in pools small enough that eviction happens all the time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "tests/core_kv/kv_test_util.hpp"

using namespace twin;
using twin::test::Rng;

namespace {

using Prefix = std::vector<TokenId>;

class ReferenceCache {
 public:
  ReferenceCache(int num_blocks, int block_size) : bs_(block_size), ref_(num_blocks, 0), key_(num_blocks) {
    for (int b = 0; b < num_blocks; ++b) free_.push_back(b);
  }

  struct Seq {
    std::vector<int> blocks;
    int published = 0;
  };

  int lookup(const Prefix& prompt) const {
    const int limit = (static_cast<int>(prompt.size()) - 1) / bs_;
    int k = 0;
    while (k < limit && cached_.count(Prefix(prompt.begin(), prompt.begin() + (k + 1) * bs_))) ++k;
    return k;
  }

  bool allocate(const Prefix& prompt, Seq& s, int hits, int total) {
    const int held = static_cast<int>(s.blocks.size());
    if (held > 0) hits = 0;
    std::vector<int> hit_blocks;
    int free_hits = 0;
    for (int k = 0; k < hits; ++k) {
      const int b = cached_.at(Prefix(prompt.begin(), prompt.begin() + (k + 1) * bs_));
      hit_blocks.push_back(b);
      if (ref_[b] == 0) ++free_hits;
    }
    const int fresh = std::max(0, (total + bs_ - 1) / bs_ - held - hits);
    if (fresh + free_hits > static_cast<int>(free_.size())) return false;
    for (int b : hit_blocks) {
      if (ref_[b]++ == 0) free_.erase(std::find(free_.begin(), free_.end(), b));
      s.blocks.push_back(b);
    }
    for (int i = 0; i < fresh; ++i) {
      const int b = free_.front();
      free_.erase(free_.begin());
      if (!key_[b].empty()) {
        cached_.erase(key_[b]);
        key_[b].clear();
      }
      ref_[b] = 1;
      s.blocks.push_back(b);
    }
    if (held == 0) s.published = hits;
    return true;
  }

  void publish(const Prefix& prompt, Seq& s, int computed) {
    const int full = std::min({computed / bs_, static_cast<int>(prompt.size()) / bs_, static_cast<int>(s.blocks.size())});
    for (int k = s.published; k < full; ++k) {
      Prefix key(prompt.begin(), prompt.begin() + (k + 1) * bs_);
      if (cached_.count(key)) continue;  // first publisher wins
      cached_[key] = s.blocks[k];
      key_[s.blocks[k]] = std::move(key);
    }
    s.published = std::max(s.published, full);
  }

  void free(Seq& s) {
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
      if (--ref_[*it] == 0) free_.push_back(*it);
    }
    s.blocks.clear();
    s.published = 0;
  }

  int num_free() const { return static_cast<int>(free_.size()); }
  int num_cached() const { return static_cast<int>(cached_.size()); }

 private:
  int bs_;
  std::vector<int> ref_;
  std::vector<Prefix> key_;
  std::vector<int> free_;  // head = least recently freed
  std::map<Prefix, int> cached_;
};

// Prompts built from a few shared stems plus private tails.
Prefix random_prompt(Rng& rng, const std::vector<Prefix>& stems) {
  const Prefix& stem = stems[static_cast<std::size_t>(rng.uniform(0, static_cast<int>(stems.size()) - 1))];
  const int keep = rng.uniform(0, static_cast<int>(stem.size()));
  Prefix p(stem.begin(), stem.begin() + keep);
  const int tail = rng.uniform(keep == 0 ? 1 : 0, 20);
  for (int i = 0; i < tail; ++i) p.push_back(rng.uniform(0, 3));  // tiny vocabulary: accidental sharing too
  return p;
}

struct Live {
  Request req;
  SeqKv seq;
  ReferenceCache::Seq ref;
  int computed = 0;
  int total = 0;
};

}  // namespace

TEST_CASE("prefix hits match a brute-force reference under eviction") {
  for (const int bs : {1, 2, 4, 7, 16}) {
    for (const int pool : {6, 12, 40}) {
      INFO("block_size=" << bs << " num_blocks=" << pool);
      Rng rng(static_cast<std::uint64_t>(bs * 100 + pool));
      std::vector<Prefix> stems;
      for (int s = 0; s < 4; ++s) {
        Prefix p;
        const int len = rng.uniform(bs, 6 * bs + 10);
        for (int i = 0; i < len; ++i) p.push_back(rng.uniform(0, 1000));
        stems.push_back(p);
      }
      KvCacheConfig c;
      c.num_blocks = pool;
      c.block_size = bs;
      // The reference names prompt blocks only; a request's own generated
      // blocks are the scheduler tests' (test_vllm_behaviours).
      c.cache_generated_blocks = false;
      KvCache kv(c);
      ReferenceCache ref(pool, bs);
      std::vector<Live> live;
      std::int64_t hits_seen = 0;
      for (int op = 0; op < 1500; ++op) {
        const int what = rng.uniform(0, 9);
        if (what < 4 || live.empty()) {  // admit
          Live l;
          l.req = twin::test::token_request(op, random_prompt(rng, stems));
          kv.init_seq(l.req, l.seq);
          const int hits = kv.lookup(l.req, l.seq);
          REQUIRE(hits == ref.lookup(l.req.prompt_tokens));
          const int first_chunk = rng.uniform(1, l.req.prompt_len);
          l.total = std::max(first_chunk, hits * bs + 1);
          const bool ok = kv.allocate(l.req, l.seq, hits, l.total, true);
          REQUIRE(ok == ref.allocate(l.req.prompt_tokens, l.ref, hits, l.total));
          if (ok) {
            l.computed = hits * bs;
            hits_seen += hits;
            live.push_back(std::move(l));
          }
        } else if (what < 8) {  // compute what is allocated, then grow by a chunk or a decode token
          Live& l = live[static_cast<std::size_t>(rng.uniform(0, static_cast<int>(live.size()) - 1))];
          l.computed = l.total;
          kv.publish(l.req, l.seq, l.computed);
          ref.publish(l.req.prompt_tokens, l.ref, l.computed);
          const int grow = l.total < l.req.prompt_len ? rng.uniform(1, l.req.prompt_len - l.total) : 1;
          const bool ok = kv.allocate(l.req, l.seq, 0, l.total + grow, false);
          REQUIRE(ok == ref.allocate(l.req.prompt_tokens, l.ref, 0, l.total + grow));
          if (ok) l.total += grow;
        } else {  // finish or preempt
          const auto i = static_cast<std::size_t>(rng.uniform(0, static_cast<int>(live.size()) - 1));
          kv.free(live[i].seq);
          ref.free(live[i].ref);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        }
        REQUIRE(kv.num_free_blocks() == ref.num_free());
        REQUIRE(kv.num_cached_blocks() == ref.num_cached());
      }
      CHECK(hits_seen > 0);
      CHECK(kv.stats().evictions > 0);
    }
  }
}
