#pragma once
// Paged KV cache bookkeeping (see kv_cache.md beside this file): a pool of
// fixed-size blocks with ref counts, an intrusive LRU free list, a hash index
// over full prompt blocks for prefix caching, a host tier for swapping, and a
// contiguous mode (the pre-paging baseline). Pure bookkeeping: an executor
// maps block ids to memory itself.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/types.hpp"
#include "engine/core/block_pool.hpp"
#include "engine/core/kv_tiers.hpp"
#include "engine/core/request.hpp"

namespace twin {

struct KvCacheConfig {
  std::int32_t num_blocks = 0;        // device blocks
  std::int32_t block_size = 16;       // tokens per block, 1..512
  bool enable_prefix_caching = true;
  double watermark = 0.0;             // fraction of blocks an admission must leave free
  std::int32_t num_host_blocks = 0;   // host tier for swap; 0 disables swapping
  bool contiguous = false;            // reserve max_model_len tokens per request
  // Name and cache every full block of a request, not only the blocks its
  // prompt names: generated tokens and an unnamed prompt tail get the
  // request's own names (generated_block_hash), so a request preempted by
  // recompute hits its own KV when it comes back, as vLLM v1 does (it hashes
  // every full block, outputs included). Needs prefix caching.
  bool cache_generated_blocks = true;
  std::int32_t max_model_len = 0;     // needed by contiguous mode
  // Tiers below HBM for evicted prefix blocks (kv_tiers.hpp), first = next
  // below HBM; empty: none (an evicted block's hash is gone). Needs prefix
  // caching; not a set_replica_option key (the simulator sets it).
  std::vector<KvTierConfig> tiers;
  // Record each tier move as a TierCopy (take_tier_copies) for an engine
  // that keeps the tiers' KV itself; the simulator leaves it off.
  bool record_tier_copies = false;
};

// Prefix stats are counted when a fresh sequence is allocated (the moment a
// lookup result is used), so a request retried at the head of the queue is
// not counted once per step.
struct KvCacheStats {
  std::int64_t lookups = 0;            // prefix lookups used by an allocation
  std::int64_t queried_blocks = 0;     // full prompt blocks looked up
  std::int64_t hit_blocks = 0;         // of those, served from the cache (HBM or a tier below)
  std::int64_t lookup_tokens = 0;      // prompt tokens of those allocations
  std::int64_t evictions = 0;          // cached blocks whose hash was dropped on reuse
  std::int64_t swapped_out_blocks = 0;
  std::int64_t swapped_in_blocks = 0;
  std::int64_t tier_hit_blocks = 0;    // of hit_blocks, loaded from a tier below HBM (per tier: tiers())
};

// The KV state of one request, owned by its holder (the scheduler).
struct SeqKv {
  std::vector<BlockId> blocks;        // device block table, in token order
  std::vector<BlockId> host_blocks;   // host block table while swapped out
  // Hash chain of the full blocks named so far: the blocks the prompt names
  // by content (tokens or trace ids), then, with cache_generated_blocks, the
  // request's own blocks as they fill (generated_block_hash).
  std::vector<BlockHash> hashes;
  std::int32_t num_named = 0;         // leading hashes named by content
  std::int32_t num_published = 0;     // leading blocks already in the hash index
};

// The hash chain of a request's full prompt blocks for `block_size`. Uses the
// prompt tokens when present, else the trace's hash ids (one trace block maps
// onto several of ours, or several onto one, at any ratio), else nothing (a
// length-only request can share no prefix). Fixed seed: same values every run.
std::vector<BlockHash> prompt_block_hashes(const Request& req, std::int32_t block_size);

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }

  // Fills seq.hashes for req (once, before the first lookup).
  void init_seq(const Request& req, SeqKv& seq) const;

  // Number of leading blocks of req's known tokens served from the cache,
  // never covering the last known token (it must be computed to produce
  // logits). `known_tokens` is the prompt on a first admission and prompt +
  // outputs when a preempted request comes back (its own blocks may hit).
  // Verifies token contents when req has tokens. With tiers, a block
  // missing from HBM but held by a tier counts (it will be loaded). Does not
  // change the cache.
  std::int32_t lookup(const Request& req, const SeqKv& seq, std::int32_t known_tokens) const;
  std::int32_t lookup(const Request& req, const SeqKv& seq) const { return lookup(req, seq, req.prompt_len); }

  // Grows seq's block table to hold `total_tokens` tokens. When seq holds no
  // blocks yet, its first `num_hit_blocks` come from the cache (as returned
  // by lookup). Free cached blocks taken as hits count against the free
  // blocks; a hit held only by a tier takes a fresh block (its KV loaded
  // into it, counted in take_tier_moves) and is published with the others
  // once computed. With `admission`, the watermark must stay free afterwards.
  // `must_fit_tokens` (vLLM's scheduler_reserve_full_isl): the free blocks
  // must be able to hold that many tokens of the sequence, though only
  // `total_tokens` are allocated now (a first chunk of a long prompt is
  // admitted only if the whole prompt would fit). Returns false and changes
  // nothing when there is not enough room.
  bool allocate(const Request& req, SeqKv& seq, std::int32_t num_hit_blocks,
                std::int32_t total_tokens, bool admission, std::int32_t must_fit_tokens = 0);

  // Publishes seq's blocks that are now full and computed (num_computed_tokens
  // counts tokens whose KV is written) in the hash index: the prompt's named
  // blocks, and with cache_generated_blocks every later full block under the
  // request's own name.
  void publish(const Request& req, SeqKv& seq, std::int32_t num_computed_tokens);

  // Shrinks seq's block table to what `total_tokens` tokens need, releasing
  // the tail blocks (speculative decoding: the slots of rejected lookahead
  // tokens). Published blocks are never released here (twin::Error: they
  // hold computed prompt KV others may share). No-op in contiguous mode.
  void truncate(SeqKv& seq, std::int32_t total_tokens);

  // Drops seq's device blocks, tail first (the tail becomes the first to be
  // evicted among them). Published blocks stay cached until reused.
  void free(SeqKv& seq);

  // Moves seq's device blocks to the host tier, appending device->host copies.
  // Returns false and changes nothing if the host tier lacks room.
  bool swap_out(SeqKv& seq, std::vector<BlockCopy>& copies);
  // Moves seq back to the device, appending host->device copies. Returns
  // false and changes nothing if the device lacks free blocks.
  bool swap_in(SeqKv& seq, std::vector<BlockCopy>& copies);
  // Releases a swapped-out seq's host blocks (abort while swapped out).
  void free_host(SeqKv& seq);

  // Blocks needed to hold total_tokens for seq beyond what it holds now.
  std::int32_t blocks_needed(const SeqKv& seq, std::int32_t total_tokens) const;
  // Blocks an admission must leave free (watermark * num_blocks, rounded down).
  std::int32_t watermark_blocks() const { return watermark_blocks_; }

  std::int32_t num_blocks() const { return config_.num_blocks; }
  std::int32_t num_free_blocks() const;      // ref count 0, cached or not
  std::int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  std::int32_t num_free_host_blocks() const;
  std::int32_t num_cached_blocks() const { return pool_.num_cached(); }  // in the hash index
  double usage() const;                      // used / total
  const KvCacheStats& stats() const { return stats_; }
  // The tiers below HBM (empty without) and their per-tier figures.
  const KvTiers& tiers() const { return tiers_; }
  // Blocks loaded from / stored into each tier since the last call (the
  // step that pays for them), sized tiers().size(); false when none moved.
  bool take_tier_moves(std::vector<std::int32_t>& loads, std::vector<std::int32_t>& stores) {
    if (!tiers_.has_moves()) return false;
    tiers_.take_moves(loads, stores);
    return true;
  }
  // With record_tier_copies: the copies behind those moves, in the order an
  // executor carries them out (kv_tiers.hpp, TierCopy).
  void take_tier_copies(std::vector<TierCopy>& out) { tiers_.take_copies(out); }

  // For tests: ref count of a device block, and whether a block is cached.
  std::int32_t ref_count(BlockId block) const;
  bool is_cached(BlockId block) const;

  // For tests: the first violated invariant, or empty. `seqs` must be every
  // sequence holding blocks of this cache: ref counts equal the number of
  // tables holding each block, the free list holds exactly the ref-0 blocks,
  // the hash index agrees with the blocks' stored hashes, no host block is in
  // two places. O(blocks handed out + blocks held), whatever the pool's size.
  std::string check_invariants(std::span<const SeqKv* const> seqs) const;

  // Bytes of per-block state the cache holds: grows with the blocks a run
  // has used, not with num_blocks (tests; the simulator's memory figures).
  std::size_t state_bytes() const {
    return pool_.state_bytes() + free_host_.capacity() * sizeof(BlockId) + hit_scratch_.capacity() * sizeof(BlockId);
  }
  // Device blocks handed out at least once.
  std::int32_t num_touched_blocks() const { return pool_.num_touched(); }

 private:
  std::int32_t blocks_for(std::int32_t tokens) const;
  BlockId take_free_block();
  BlockId take_host_block();
  // allocate()'s parts: a contiguous-mode request's whole reservation; the
  // hit blocks looked up into hit_scratch_; the hits taken into the
  // sequence's table (tier hits staged into fresh blocks); the lookup's
  // prefix statistics.
  struct HitScan {
    std::int32_t free_hits = 0;    // device hits no other request holds
    std::int32_t loads = 0;        // hits held only by a tier: each takes a fresh block
    std::int32_t leading_hbm = -1; // device hits before the first load: already published
  };
  bool allocate_contiguous(const Request& req, SeqKv& seq, std::int32_t total_tokens, bool admission);
  HitScan scan_hits(const Request& req, const SeqKv& seq, std::int32_t hits);
  void take_hits(SeqKv& seq, std::int32_t hits, std::int32_t loads);
  void count_lookup(const Request& req, SeqKv& seq, std::int32_t hits, const HitScan& scan);

  KvCacheConfig config_;
  KvCacheStats stats_;
  BlockPool pool_;
  std::int32_t watermark_blocks_ = 0;
  std::int32_t contiguous_blocks_ = 0;   // per request in contiguous mode
  bool prefix_caching_ = false;          // enabled and not contiguous
  std::vector<BlockId> free_host_;       // stack of returned host blocks
  BlockId next_host_block_ = 0;          // host blocks from here up were never used
  std::vector<BlockId> hit_scratch_;     // allocate's hit blocks (-1: loaded from a tier), reused across calls
  KvTiers tiers_;
};

}  // namespace twin
