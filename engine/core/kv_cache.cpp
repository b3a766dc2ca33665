#include "engine/core/kv_cache.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/core/prefix_hash.hpp"

namespace twin {

namespace {

const KvCacheConfig& validated(const KvCacheConfig& c) {
  if (c.block_size < 1 || c.block_size > 512) {
    throw UsageError("kv cache: block_size " + std::to_string(c.block_size) + " is out of range: expected 1 to 512");
  }
  if (c.num_blocks < 1) {
    throw UsageError("kv cache: num_blocks " + std::to_string(c.num_blocks) + " must be at least 1");
  }
  if (!(c.watermark >= 0.0 && c.watermark < 1.0)) {
    throw UsageError("kv cache: watermark " + std::to_string(c.watermark) + " must be in [0, 1)");
  }
  if (c.num_host_blocks < 0) {
    throw UsageError("kv cache: num_host_blocks " + std::to_string(c.num_host_blocks) + " must not be negative");
  }
  if (!c.tiers.empty() && (!c.enable_prefix_caching || c.contiguous)) {
    throw UsageError("kv cache: tiers below HBM hold prefix-cached blocks: they need prefix caching on and "
                     "contiguous mode off");
  }
  if (c.contiguous && c.max_model_len < 1) {
    throw UsageError("kv cache: contiguous mode needs max_model_len >= 1, got " + std::to_string(c.max_model_len));
  }
  return c;
}

std::span<const TokenId> block_tokens(const Request& req, std::size_t k, std::int32_t block_size) {
  return {req.prompt_tokens.data() + k * static_cast<std::size_t>(block_size), static_cast<std::size_t>(block_size)};
}

}  // namespace

KvCache::KvCache(const KvCacheConfig& config)
    : config_(validated(config)),
      pool_(config.num_blocks, config.block_size),
      watermark_blocks_(static_cast<std::int32_t>(config.watermark * config.num_blocks)),
      contiguous_blocks_(config.contiguous ? (config.max_model_len + config.block_size - 1) / config.block_size : 0),
      prefix_caching_(config.enable_prefix_caching && !config.contiguous),
      tiers_(config.tiers) {
  tiers_.record_copies(config.record_tier_copies && !config.tiers.empty());
  // Nothing here is sized by the block counts: a pool of millions of blocks
  // costs what its used blocks cost (see BlockPool), and so does the host
  // tier (next_host_block_).
}

BlockId KvCache::take_host_block() {
  // Host blocks are handed out in id order, returned ones first (a stack):
  // the blocks never used yet are next_host_block_ and up.
  if (!free_host_.empty()) {
    const BlockId b = free_host_.back();
    free_host_.pop_back();
    return b;
  }
  return next_host_block_++;
}

std::int32_t KvCache::blocks_for(std::int32_t tokens) const {
  return (tokens + config_.block_size - 1) / config_.block_size;
}

BlockId KvCache::take_free_block() {
  bool evicted = false;
  const BlockId b = pool_.pop_free(evicted);
  if (evicted) {
    ++stats_.evictions;
    // Spilled down instead of lost (the hash is still the block's stored one).
    if (!tiers_.empty()) tiers_.spill(pool_.stored_hash(b), b);
  }
  return b;
}

void KvCache::init_seq(const Request& req, SeqKv& seq) const {
  seq.hashes.clear();
  if (prefix_caching_) seq.hashes = prompt_block_hashes(req, config_.block_size);
  seq.num_named = static_cast<std::int32_t>(seq.hashes.size());
}

std::int32_t KvCache::lookup(const Request& req, const SeqKv& seq, std::int32_t known_tokens) const {
  if (!prefix_caching_ || known_tokens < 1) return 0;
  // The last known token is always computed: it produces the next logits.
  const std::size_t limit =
      std::min(seq.hashes.size(), static_cast<std::size_t>((known_tokens - 1) / config_.block_size));
  const bool with_tokens = !req.prompt_tokens.empty();
  const auto named = static_cast<std::size_t>(seq.num_named);
  std::size_t k = 0;
  for (; k < limit; ++k) {
    const BlockId b = pool_.find(seq.hashes[k]);
    if (b < 0) {
      if (!tiers_.empty() && tiers_.find(seq.hashes[k]) >= 0) continue;  // loaded back at allocation
      break;
    }
    // Token, trace-id and own chains have distinct seeds: a block of another
    // kind under our hash is a 64-bit collision, so a miss. Own blocks carry
    // no tokens.
    const bool tokens_here = with_tokens && k < named;
    if (pool_.has_tokens(b) != tokens_here) break;
    if (tokens_here && !pool_.tokens_match(b, block_tokens(req, k, config_.block_size))) break;
  }
  return static_cast<std::int32_t>(k);
}

std::int32_t KvCache::blocks_needed(const SeqKv& seq, std::int32_t total_tokens) const {
  const auto held = static_cast<std::int32_t>(seq.blocks.size());
  if (config_.contiguous) return held > 0 ? 0 : contiguous_blocks_;
  return std::max(0, blocks_for(total_tokens) - held);
}

bool KvCache::allocate_contiguous(const Request& req, SeqKv& seq, std::int32_t total_tokens, bool admission) {
  if (total_tokens > config_.max_model_len) {
    throw Error("kv cache: request " + std::to_string(req.id) + " needs " + std::to_string(total_tokens) +
                " tokens, beyond max_model_len " + std::to_string(config_.max_model_len) +
                " reserved in contiguous mode");
  }
  if (!seq.blocks.empty()) return true;
  const std::int32_t reserve = admission ? watermark_blocks_ : 0;
  if (pool_.num_free() - contiguous_blocks_ < reserve) return false;
  seq.blocks.reserve(static_cast<std::size_t>(contiguous_blocks_));
  for (std::int32_t i = 0; i < contiguous_blocks_; ++i) seq.blocks.push_back(take_free_block());
  ++stats_.lookups;
  return true;
}

KvCache::HitScan KvCache::scan_hits(const Request& req, const SeqKv& seq, std::int32_t hits) {
  HitScan scan;
  hit_scratch_.clear();
  for (std::int32_t k = 0; k < hits; ++k) {
    const BlockHash h = seq.hashes[static_cast<std::size_t>(k)];
    const BlockId b = pool_.find(h);
    if (b < 0) {
      if (!tiers_.empty() && tiers_.find(h) >= 0) {
        if (scan.leading_hbm < 0) scan.leading_hbm = k;
        ++scan.loads;
        hit_scratch_.push_back(-1);
        continue;
      }
      throw Error("kv cache: request " + std::to_string(req.id) + ": hit block " + std::to_string(k) +
                  " is no longer cached (lookup and allocate must happen in the same step)");
    }
    if (pool_.ref_count(b) == 0) ++scan.free_hits;
    hit_scratch_.push_back(b);
  }
  return scan;
}

void KvCache::take_hits(SeqKv& seq, std::int32_t hits, std::int32_t loads) {
  if (loads == 0) {
    for (const BlockId b : hit_scratch_) {
      pool_.acquire(b);
      seq.blocks.push_back(b);
    }
    return;
  }
  // Every device hit is taken before any fresh block is popped: a pop could
  // otherwise evict a free hit further on. The tier hits are read (counted,
  // most recent in their tier) before the pops' spills land.
  for (const BlockId b : hit_scratch_) {
    if (b >= 0) pool_.acquire(b);
  }
  // With recorded copies a hit's KV goes to a staging block (its number
  // kept in place of the -1) and from there into its fresh block, after
  // that block's own eviction has been recorded.
  for (std::int32_t k = 0; k < hits; ++k) {
    BlockId& slot = hit_scratch_[static_cast<std::size_t>(k)];
    if (slot < 0) {
      const std::int32_t stage = tiers_.hit(seq.hashes[static_cast<std::size_t>(k)]);
      if (stage >= 0) slot = -2 - stage;
    }
  }
  for (const BlockId b : hit_scratch_) {
    if (b >= 0) {
      seq.blocks.push_back(b);
      continue;
    }
    const BlockId fresh = take_free_block();
    if (b <= -2) tiers_.add_copy({TierCopy::Kind::stage_to_device, -1, -1, -2 - b, fresh});
    seq.blocks.push_back(fresh);
  }
}

void KvCache::count_lookup(const Request& req, SeqKv& seq, std::int32_t hits, const HitScan& scan) {
  // Loaded blocks hold no computed KV yet as far as the index knows: they
  // are published with the request's next publish(), as computed ones.
  seq.num_published = scan.loads == 0 ? hits : scan.leading_hbm;
  ++stats_.lookups;
  const auto queried = std::min(seq.hashes.size(), static_cast<std::size_t>(std::max(0, req.prompt_len - 1) /
                                                                            config_.block_size));
  // A resumed request may hit its own blocks past the prompt: they count as
  // queried too, so the hit rate stays a fraction.
  stats_.queried_blocks += std::max(static_cast<std::int64_t>(queried), static_cast<std::int64_t>(hits));
  stats_.hit_blocks += hits;
  stats_.tier_hit_blocks += scan.loads;
  stats_.lookup_tokens += req.prompt_len;
}

bool KvCache::allocate(const Request& req, SeqKv& seq, std::int32_t num_hit_blocks, std::int32_t total_tokens,
                       bool admission, std::int32_t must_fit_tokens) {
  if (config_.contiguous) return allocate_contiguous(req, seq, total_tokens, admission);
  const auto held = static_cast<std::int32_t>(seq.blocks.size());
  // Hits apply only to a sequence that holds nothing yet (as documented).
  const std::int32_t hits = held == 0 ? num_hit_blocks : 0;
  if (hits < 0 || hits > static_cast<std::int32_t>(seq.hashes.size())) {
    throw Error("kv cache: request " + std::to_string(req.id) + " asks for " + std::to_string(num_hit_blocks) +
                " hit blocks but has " + std::to_string(seq.hashes.size()) + " full prompt blocks");
  }
  const HitScan scan = scan_hits(req, seq, hits);
  const std::int32_t new_blocks = std::max(0, blocks_for(total_tokens) - held - hits);
  const std::int32_t reserve = admission ? watermark_blocks_ : 0;
  const std::int32_t must_fit = std::max(new_blocks, blocks_for(must_fit_tokens) - held - hits);
  if (pool_.num_free() - (must_fit + scan.loads + scan.free_hits) < reserve) return false;

  if (held == 0) seq.blocks.reserve(static_cast<std::size_t>(hits + new_blocks));
  take_hits(seq, hits, scan.loads);
  // Growth relies on push_back's geometric capacity: one decode block at a
  // time must not reallocate the table each call.
  for (std::int32_t i = 0; i < new_blocks; ++i) seq.blocks.push_back(take_free_block());
  if (held == 0) count_lookup(req, seq, hits, scan);
  return true;
}

void KvCache::publish(const Request& req, SeqKv& seq, std::int32_t num_computed_tokens) {
  if (!prefix_caching_) return;
  auto full = std::min(static_cast<std::size_t>(std::max(0, num_computed_tokens) / config_.block_size),
                       seq.blocks.size());
  if (config_.cache_generated_blocks) {
    // The blocks nothing names get the request's own names as they fill.
    while (seq.hashes.size() < full) {
      const BlockHash parent = seq.hashes.empty() ? BlockHash{0} : seq.hashes.back();
      seq.hashes.push_back(generated_block_hash(parent, req.id, static_cast<std::int32_t>(seq.hashes.size())));
    }
  } else {
    full = std::min(full, seq.hashes.size());
  }
  const bool with_tokens = !req.prompt_tokens.empty();
  const auto named = static_cast<std::size_t>(seq.num_named);
  for (auto k = static_cast<std::size_t>(seq.num_published); k < full; ++k) {
    // A duplicate of an already published block stays unpublished: the index
    // keeps the first block under each hash.
    pool_.publish(seq.blocks[k], seq.hashes[k],
                  with_tokens && k < named ? block_tokens(req, k, config_.block_size) : std::span<const TokenId>{});
  }
  seq.num_published = static_cast<std::int32_t>(std::max(full, static_cast<std::size_t>(seq.num_published)));
}

void KvCache::truncate(SeqKv& seq, std::int32_t total_tokens) {
  if (config_.contiguous) return;
  const auto keep = static_cast<std::size_t>(std::max(0, blocks_for(total_tokens)));
  if (keep >= seq.blocks.size()) return;
  if (keep < static_cast<std::size_t>(seq.num_published)) {
    throw Error("kv cache: truncating to " + std::to_string(total_tokens) + " tokens would release " +
                std::to_string(seq.num_published - static_cast<std::int32_t>(keep)) + " published blocks");
  }
  // Tail first, as free(): the last block reaches the free list first.
  while (seq.blocks.size() > keep) {
    pool_.release(seq.blocks.back());
    seq.blocks.pop_back();
  }
}

void KvCache::free(SeqKv& seq) {
  // Tail first: the tail reaches the free list first, so it is evicted first.
  // The blocks' states are scattered over the pool: load a few ahead.
  const std::size_t n = seq.blocks.size();
  constexpr std::size_t kAhead = 8;
  for (std::size_t i = 0; i < std::min(n, kAhead); ++i) pool_.prefetch(seq.blocks[n - 1 - i]);
  for (std::size_t i = n; i-- > 0;) {
    if (i >= kAhead) pool_.prefetch(seq.blocks[i - kAhead]);
    pool_.release(seq.blocks[i]);
  }
  seq.blocks.clear();
  seq.num_published = 0;
}

bool KvCache::swap_out(SeqKv& seq, std::vector<BlockCopy>& copies) {
  if (!seq.host_blocks.empty()) throw Error("kv cache: swap_out of a sequence that is already swapped out");
  if (static_cast<std::int32_t>(seq.blocks.size()) > num_free_host_blocks()) return false;
  seq.host_blocks.reserve(seq.blocks.size());
  for (const BlockId dev : seq.blocks) {
    const BlockId host = take_host_block();
    seq.host_blocks.push_back(host);
    copies.push_back(BlockCopy{dev, host});
  }
  stats_.swapped_out_blocks += static_cast<std::int64_t>(seq.blocks.size());
  free(seq);
  return true;
}

bool KvCache::swap_in(SeqKv& seq, std::vector<BlockCopy>& copies) {
  if (!seq.blocks.empty()) throw Error("kv cache: swap_in of a sequence that still holds device blocks");
  if (static_cast<std::int32_t>(seq.host_blocks.size()) > pool_.num_free()) return false;
  seq.blocks.reserve(seq.host_blocks.size());
  for (const BlockId host : seq.host_blocks) {
    const BlockId dev = take_free_block();
    seq.blocks.push_back(dev);
    copies.push_back(BlockCopy{host, dev});
  }
  stats_.swapped_in_blocks += static_cast<std::int64_t>(seq.host_blocks.size());
  free_host(seq);
  // The fresh blocks are unpublished; the next publish() re-offers them.
  seq.num_published = 0;
  return true;
}

void KvCache::free_host(SeqKv& seq) {
  for (auto it = seq.host_blocks.rbegin(); it != seq.host_blocks.rend(); ++it) free_host_.push_back(*it);
  seq.host_blocks.clear();
}

std::int32_t KvCache::num_free_blocks() const { return pool_.num_free(); }

std::int32_t KvCache::num_free_host_blocks() const {
  return static_cast<std::int32_t>(free_host_.size()) + (config_.num_host_blocks - next_host_block_);
}

double KvCache::usage() const { return static_cast<double>(num_used_blocks()) / static_cast<double>(num_blocks()); }

std::int32_t KvCache::ref_count(BlockId block) const {
  if (block < 0 || block >= num_blocks()) throw Error("kv cache: block id " + std::to_string(block) + " out of range");
  return pool_.ref_count(block);
}

bool KvCache::is_cached(BlockId block) const {
  if (block < 0 || block >= num_blocks()) throw Error("kv cache: block id " + std::to_string(block) + " out of range");
  return pool_.is_cached(block);
}

std::string KvCache::check_invariants(std::span<const SeqKv* const> seqs) const {
  if (std::string pool_error = pool_.check(); !pool_error.empty()) return pool_error;
  if (std::string tier_error = tiers_.check(); !tier_error.empty()) return tier_error;
  // Only blocks handed out at least once can be held: the check costs what
  // the run touched, so it works on a pool of any size.
  const std::int32_t touched = pool_.num_touched();
  std::vector<std::int32_t> holders(static_cast<std::size_t>(touched), 0);
  std::vector<std::uint8_t> host_used(static_cast<std::size_t>(next_host_block_), 0);
  std::vector<std::int32_t> last_table(static_cast<std::size_t>(touched), -1);
  std::int32_t table = -1;
  for (const SeqKv* seq : seqs) {
    ++table;
    for (const BlockId b : seq->blocks) {
      if (b < 0 || b >= num_blocks()) return "block table holds invalid block " + std::to_string(b);
      if (b >= touched) return "block table holds block " + std::to_string(b) + ", never handed out";
      if (last_table[static_cast<std::size_t>(b)] == table) {
        return "block " + std::to_string(b) + " appears twice in one block table";
      }
      last_table[static_cast<std::size_t>(b)] = table;
      ++holders[static_cast<std::size_t>(b)];
    }
    if (seq->num_published < 0 || seq->num_published > static_cast<std::int32_t>(seq->blocks.size())) {
      return "sequence claims " + std::to_string(seq->num_published) + " published blocks but holds " +
             std::to_string(seq->blocks.size());
    }
    for (const BlockId h : seq->host_blocks) {
      if (h < 0 || h >= config_.num_host_blocks) return "host table holds invalid block " + std::to_string(h);
      if (h >= next_host_block_) return "host table holds block " + std::to_string(h) + ", never handed out";
      if (host_used[static_cast<std::size_t>(h)]++) return "host block " + std::to_string(h) + " held twice";
    }
  }
  for (BlockId b = 0; b < touched; ++b) {
    if (holders[static_cast<std::size_t>(b)] != pool_.ref_count(b)) {
      return "block " + std::to_string(b) + " has ref " + std::to_string(pool_.ref_count(b)) + " but " +
             std::to_string(holders[static_cast<std::size_t>(b)]) + " tables hold it";
    }
  }
  for (const BlockId h : free_host_) {
    if (h < 0 || h >= next_host_block_) return "host free list holds invalid block " + std::to_string(h);
    if (host_used[static_cast<std::size_t>(h)]++) return "host block " + std::to_string(h) + " is free and held";
  }
  // Host blocks from next_host_block_ up are free without a stack entry.
  for (BlockId h = 0; h < next_host_block_; ++h) {
    if (!host_used[static_cast<std::size_t>(h)]) return "host block " + std::to_string(h) + " leaked";
  }
  return {};
}

}  // namespace twin
