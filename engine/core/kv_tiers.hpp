#pragma once
// Tiers below HBM for cached prefix blocks (kv_cache.md, "Tiers"): host DRAM,
// then local SSD, or any list of them, each an LRU of block hashes with a
// capacity in blocks. A cached block evicted from the device pool spills
// into the first tier instead of vanishing; a full tier demotes its least
// recently used block to the next one, and the last drops it. A prefix
// lookup that misses the device pool but finds the block here has it loaded
// back. Pure bookkeeping: which hashes live where and how many blocks moved;
// what a move costs (bytes, bandwidth, latency) is the clock's.
//
// Tiers are exclusive: a hash is in at most one of them. A block loaded back
// keeps its copy in its tier (it is touched, most recent there): evicted
// from the device again it costs no write. Only hashes are kept, no tokens:
// token chains and trace-id chains start from different seeds, so a wrong
// hit needs a 64-bit collision.
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/types.hpp"

namespace twin {

struct KvTierConfig {
  std::string name;                 // "dram", "ssd": for outputs only
  std::int64_t capacity_blocks = 0; // at least 1
};

// Per tier, over the run. Blocks, not bytes: the caller knows a block's size.
struct KvTierStats {
  std::int64_t hit_blocks = 0;      // prefix blocks found here by an allocation (each loaded to HBM)
  std::int64_t stored_blocks = 0;   // written into this tier (from HBM or the tier above)
  std::int64_t demoted_blocks = 0;  // pushed out to the next tier, or dropped from the last
  std::int64_t resident_blocks = 0; // held now
};

class KvTiers {
 public:
  KvTiers() = default;
  // Throws UsageError for a tier without a name or capacity.
  explicit KvTiers(std::vector<KvTierConfig> tiers);

  bool empty() const { return tiers_.empty(); }
  std::size_t size() const { return tiers_.size(); }
  const KvTierConfig& config(std::size_t tier) const { return tiers_[tier].config; }
  const KvTierStats& stats(std::size_t tier) const { return tiers_[tier].stats; }

  // The tier holding h, or -1.
  std::int32_t find(BlockHash h) const;
  // A hit on h (find(h) >= 0) is being loaded: most recent in its tier, counted.
  void hit(BlockHash h);
  // h was evicted from the device pool: into the first tier (a write), or
  // only touched if it is there already; one in a lower tier moves up.
  void spill(BlockHash h);

  // Blocks moved since the last call, per tier (sized size(), then zeroed):
  // loads (tier -> HBM) and stores (into the tier).
  void take_moves(std::vector<std::int32_t>& loads, std::vector<std::int32_t>& stores);
  bool has_moves() const { return moved_; }

  // First violated invariant (sizes vs capacities vs the index), or empty.
  std::string check() const;

 private:
  struct Tier {
    KvTierConfig config;
    std::list<BlockHash> lru;  // least recent first
    KvTierStats stats;
    std::int32_t pending_loads = 0;
    std::int32_t pending_stores = 0;
  };
  struct Where {
    std::int32_t tier = 0;
    std::list<BlockHash>::iterator pos;
  };
  void insert(std::size_t tier, BlockHash h);

  std::vector<Tier> tiers_;
  std::unordered_map<BlockHash, Where> index_;
  bool moved_ = false;
};

}  // namespace twin
