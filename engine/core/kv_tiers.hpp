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
// Each block a tier holds sits in a slot (0 .. capacity - 1), so an engine
// can keep the KV itself there: with copies recorded (record_copies), every
// move is also written down as a TierCopy, in the order an executor must
// carry them out before the step that pays for them (take_copies). A load
// goes through a staging block: read from its slot when it is hit, written
// into its fresh device block once that block is taken (after the block's
// own old contents have been stored), so each copy reads its source as of
// the moment it was recorded. The simulator records none and pays nothing.
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

// One copy an executor carries out, in order: where from, where to.
struct TierCopy {
  enum class Kind : std::uint8_t {
    device_to_tier,  // device block `from` -> slot `to` of tier `to_tier` (a spill)
    tier_to_tier,    // slot `from` of `from_tier` -> slot `to` of `to_tier` (a demotion)
    tier_to_stage,   // slot `from` of `from_tier` -> staging block `to` (a load, read when hit)
    stage_to_device, // staging block `from` -> device block `to` (the load written)
  };
  Kind kind = Kind::device_to_tier;
  std::int32_t from_tier = -1, to_tier = -1;  // -1 where the end is a device or staging block
  std::int32_t from = 0, to = 0;
};

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
  // A hit on h (find(h) >= 0) is being loaded: most recent in its tier,
  // counted. Returns the staging block its KV is read into (recorded copies:
  // the caller records the staging -> device copy once its block is taken),
  // or -1 without recorded copies.
  std::int32_t hit(BlockHash h);
  // h, held by device block `block`, was evicted from the device pool: into
  // the first tier (a write), or only touched if it is there already; one in
  // a lower tier moves up (written from the device, its old copy dropped).
  void spill(BlockHash h, BlockId block);

  // Copies: off by default. take_copies hands over those recorded since its
  // last call and restarts the staging numbering.
  void record_copies(bool on) { record_copies_ = on; }
  bool records_copies() const { return record_copies_; }
  void add_copy(const TierCopy& c) { copies_.push_back(c); }
  void take_copies(std::vector<TierCopy>& out);

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
    std::vector<std::int32_t> free_slots;  // slots emptied since; then next_slot and up
    std::int32_t next_slot = 0;
  };
  struct Where {
    std::int32_t tier = 0;
    std::list<BlockHash>::iterator pos;
    std::int32_t slot = 0;
  };
  // Writes h into `tier` from `source` (a device block, or a slot of the
  // tier above), first making room: the least recent block moves down (or,
  // from the last tier, is dropped), its copy recorded before the write.
  struct Source {
    std::int32_t tier = -1;  // -1: device block
    std::int32_t index = 0;
  };
  void insert(std::size_t tier, BlockHash h, Source source);
  void free_slot(Tier& t, std::int32_t slot);

  std::vector<Tier> tiers_;
  std::unordered_map<BlockHash, Where> index_;
  bool moved_ = false;
  bool record_copies_ = false;
  std::vector<TierCopy> copies_;
  std::int32_t next_stage_ = 0;
};

}  // namespace twin
